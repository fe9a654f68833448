//go:build linux

package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY returns both ends of a pseudo-terminal.
func openPTY(t *testing.T) (master, tty *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		t.Skipf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		m.Close()
		t.Skipf("ptsname: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Skipf("open pts: %v", err)
	}
	t.Cleanup(func() { s.Close(); m.Close() })
	return m, s
}

func TestLogFormatFollowsTheTerminal(t *testing.T) {
	master, tty := openPTY(t)
	if !isTerminal(tty) {
		t.Fatal("a pseudo-terminal is not seen as a terminal")
	}
	log, err := newLogger(tty, "info", "auto")
	if err != nil {
		t.Fatal(err)
	}
	log.Info("delivery", "provider", "acme", "outcome", "inserted")
	buf := make([]byte, 4096)
	master.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := master.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	if line := string(buf[:n]); !strings.Contains(line, "level=INFO msg=delivery provider=acme outcome=inserted") {
		t.Errorf("on a terminal: %q, want text", line)
	}

	// A file (a journal, a pipe) gets JSON.
	f, err := os.CreateTemp(t.TempDir(), "log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if isTerminal(f) {
		t.Fatal("a regular file is seen as a terminal")
	}
	log, _ = newLogger(f, "info", "auto")
	log.Info("delivery", "provider", "acme")
	b, _ := os.ReadFile(f.Name())
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil || m["provider"] != "acme" {
		t.Errorf("to a file: %q (%v), want JSON", b, err)
	}
}

func TestLogLevels(t *testing.T) {
	for _, c := range []struct {
		level string
		want  []string // messages that get through, of debug/info/warn/error
	}{
		{"debug", []string{"d", "i", "w", "e"}},
		{"info", []string{"i", "w", "e"}},
		{"INFO", []string{"i", "w", "e"}},
		{"warn", []string{"w", "e"}},
		{"error", []string{"e"}},
	} {
		var buf bytes.Buffer
		log, err := newLogger(&buf, c.level, "json")
		if err != nil {
			t.Fatalf("%s: %v", c.level, err)
		}
		log.Debug("d")
		log.Info("i")
		log.Warn("w")
		log.Error("e")
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err == nil {
				got = append(got, m["msg"].(string))
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("--log-level %s let through %v, want %v", c.level, got, c.want)
		}
	}
	for _, bad := range [][2]string{{"verbose", "json"}, {"", "json"}, {"info", "yaml"}} {
		if _, err := newLogger(&bytes.Buffer{}, bad[0], bad[1]); err == nil {
			t.Errorf("newLogger(%q, %q) accepted", bad[0], bad[1])
		}
	}
}
