package reconcile

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/payload"
)

// FileSource reads a JSONL file with one raw provider event per line, for
// providers without an events API (an export, a dead-letter dump). Each line
// is the exact body a webhook would carry; its id, type and creation time are
// read with payload.Get, as the webhook path reads them (the last of duplicate
// keys wins), and a line is held to the provider's nesting limit like a body.
type FileSource struct {
	Path     string
	IDPath   string   // default "id"
	TypePath string   // default "type"
	TimePath string   // RFC 3339 string or unix seconds; default "created"
	Types    []string // only these types; empty: every type
	PageSize int      // events per page; default 100
	MaxDepth int      // nesting limit of a line; default config.DefaultMaxDepth
}

// Name implements Source.
func (s *FileSource) Name() string { return "file:" + filepath.Base(s.Path) }

// maxLine bounds one event.
const maxLine = 16 << 20

// List implements Source. The cursor is "OFFSET:LINE": where the next page
// starts in the file. Blank lines are skipped; a line that is not an event
// with an id and a time fails the page, naming the line.
func (s *FileSource) List(ctx context.Context, w Window, cursor string) (Page, error) {
	size := s.PageSize
	if size <= 0 {
		size = 100
	}
	var offset int64
	line := 0
	if cursor != "" {
		o, l, ok := strings.Cut(cursor, ":")
		var err1, err2 error
		offset, err1 = strconv.ParseInt(o, 10, 64)
		line, err2 = strconv.Atoi(l)
		if !ok || err1 != nil || err2 != nil || offset < 0 {
			return Page{}, fmt.Errorf("%s: bad cursor %q", s.Path, cursor)
		}
	}
	f, err := os.Open(s.Path)
	if err != nil {
		return Page{}, err
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return Page{}, fmt.Errorf("%s: %w", s.Path, err)
	}
	r := bufio.NewReaderSize(f, 64<<10)
	var p Page
	for len(p.Events) < size {
		if err := ctx.Err(); err != nil {
			return Page{}, err
		}
		raw, err := readLine(r)
		if len(raw) == 0 && errors.Is(err, io.EOF) {
			return p, nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return Page{}, fmt.Errorf("%s:%d: %w", s.Path, line+1, err)
		}
		offset += int64(len(raw))
		line++
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 {
			continue
		}
		e, err := s.event(raw)
		if err != nil {
			return Page{}, fmt.Errorf("%s:%d: %w", s.Path, line, err)
		}
		if !e.Created.Before(w.From) && !e.Created.After(w.To) && wanted(s.Types, e.Type) {
			p.Events = append(p.Events, e)
		}
	}
	// A full page: there may be more. The next List returns an empty last
	// page if not, which costs one open.
	p.Next = strconv.FormatInt(offset, 10) + ":" + strconv.Itoa(line)
	return p, nil
}

func readLine(r *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := r.ReadSlice('\n')
		buf = append(buf, chunk...)
		if len(buf) > maxLine {
			return nil, fmt.Errorf("line longer than %d bytes", maxLine)
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return buf, err
		}
	}
}

func (s *FileSource) event(raw []byte) (Event, error) {
	depth := s.MaxDepth
	if depth == 0 {
		depth = config.DefaultMaxDepth
	}
	switch err := payload.Check(raw, depth); {
	case errors.Is(err, payload.ErrTooDeep):
		return Event{}, fmt.Errorf("nests deeper than %d levels (the provider's max_depth)", depth)
	case err != nil:
		return Event{}, errors.New("not valid JSON")
	}
	idPath, typePath, timePath := or(s.IDPath, "id"), or(s.TypePath, "type"), or(s.TimePath, "created")
	id := payload.Get(raw, idPath)
	if id.Type != gjson.String || id.Str == "" {
		return Event{}, fmt.Errorf("no event id (a non-empty string) at %s", idPath)
	}
	var created time.Time
	switch t := payload.Get(raw, timePath); t.Type {
	case gjson.Number:
		created = time.UnixMilli(int64(t.Float() * 1000)).UTC()
	case gjson.String:
		v, err := time.Parse(time.RFC3339Nano, t.Str)
		if err != nil {
			return Event{}, fmt.Errorf("%s: %q is not an RFC 3339 time", timePath, t.Str)
		}
		created = v.UTC()
	default:
		return Event{}, fmt.Errorf("no event time (RFC 3339 or unix seconds) at %s", timePath)
	}
	return Event{ID: id.Str, Type: payload.Get(raw, typePath).String(), Created: created, Body: append([]byte(nil), raw...)}, nil
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
