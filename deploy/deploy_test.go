// Package deploy_test checks the files in deploy/: the alert rules parse with
// Prometheus's own rule parser, every metric the rules and the dashboard query
// is one hookledger exports (with the labels used), and the systemd unit has
// the hardening the README promises.
package deploy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/hookledger/hookledger/metrics"
	"github.com/hookledger/hookledger/schema"
)

// exported maps every series name hookledger exposes (histograms expanded to
// _bucket, _sum and _count) to the label names it carries.
func exported(t *testing.T) map[string]map[string]bool {
	t.Helper()
	db, err := schema.Open(context.Background(), filepath.Join(t.TempDir(), schema.FileName), schema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// Wire every optional part, as serve does when replicating, reconciling,
	// serving TLS, forwarding and closing periods on a schedule.
	m := metrics.New(metrics.Options{Providers: []string{"acme"}, Version: "test", Commit: "test"})
	m.WatchDatabase(db, nil)
	m.WatchWriterQueue(func() int { return 0 }, 4096)
	m.WatchDisk(func() (uint64, uint64, error) { return 1, 2, nil })
	m.ObserveDelivery("acme", "inserted", "", time.Millisecond)
	m.ObserveBatch(1, time.Millisecond)
	m.ReconcileRun("acme", 1, nil)
	m.SetReplicationStatus(func() (time.Duration, time.Time, bool) { return time.Second, time.Now(), true })
	m.SetTLSCertificate(time.Now().Add(time.Hour))
	m.TLSReload(nil)
	fwd := m.WatchForward(db, []string{"app"}, nil)
	fwd.ObserveAttempt("app", "delivered", time.Millisecond)
	fwd.SetConcurrencyLimit("app", 8)
	m.WatchInvoicing().ObserveClose("closed")
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]map[string]bool{
		"up": {}, // added by Prometheus to every target
	}
	for _, mf := range mfs {
		labels := map[string]bool{}
		for _, m := range mf.Metric {
			for _, l := range m.Label {
				labels[l.GetName()] = true
			}
		}
		if mf.GetType().String() == "HISTOGRAM" {
			names[mf.GetName()+"_sum"] = labels
			names[mf.GetName()+"_count"] = labels
			bucket := map[string]bool{"le": true}
			for l := range labels {
				bucket[l] = true
			}
			names[mf.GetName()+"_bucket"] = bucket
			continue
		}
		names[mf.GetName()] = labels
	}
	return names
}

// reporter is the part of *testing.T that checkQuery needs, so the checker
// itself can be tested.
type reporter interface {
	Errorf(format string, args ...any)
}

// checkQuery parses a PromQL expression and checks each selector's metric
// name and label names against what hookledger exports.
func checkQuery(t reporter, where, expr string, names map[string]map[string]bool) {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	p := parser.NewParser(parser.Options{})
	e, err := p.ParseExpr(expr)
	if err != nil {
		t.Errorf("%s: %v\n%s", where, err, expr)
		return
	}
	selectors := 0
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		selectors++
		labels, ok := names[vs.Name]
		if !ok {
			t.Errorf("%s: queries %q, which hookledger does not export", where, vs.Name)
			return nil
		}
		for _, m := range vs.LabelMatchers {
			switch m.Name {
			case model.MetricNameLabel, "job", "instance": // set by Prometheus
				continue
			}
			if !labels[m.Name] {
				t.Errorf("%s: %s has no label %q", where, vs.Name, m.Name)
			}
		}
		return nil
	})
	if selectors == 0 {
		t.Errorf("%s: no metric selector in %q", where, expr)
	}
}

func TestAlertRulesParseAndUseExportedMetrics(t *testing.T) {
	groups, errs := rulefmt.ParseFile("alerts.yml", false, model.UTF8Validation, parser.NewParser(parser.Options{}),
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, err := range errs {
		t.Error(err)
	}
	if groups == nil {
		t.FailNow()
	}
	names := exported(t)
	alerts := map[string]bool{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				t.Errorf("group %s: only alerting rules belong in alerts.yml (record %q)", g.Name, r.Record)
				continue
			}
			alerts[r.Alert] = true
			checkQuery(t, r.Alert, r.Expr, names)
			if s := r.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("%s: severity %q, want warning or critical", r.Alert, s)
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: needs a summary and a description", r.Alert)
			}
		}
	}
	// The alerts the issue asks for, by what they watch.
	for _, want := range []string{"HookledgerFailedReceiptAging", "HookledgerReplicationLagging", "HookledgerReplicationStale",
		"HookledgerSignatureFailureSpike", "HookledgerWriterQueueSaturated"} {
		if !alerts[want] {
			t.Errorf("alert %s missing", want)
		}
	}
}

// The rule parser really rejects a broken rule; otherwise the test above
// would prove nothing.
func TestRuleParserRejectsBrokenRules(t *testing.T) {
	for name, yml := range map[string]string{
		"bad promql":    "groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: rate(x[5m]\n",
		"unknown field": "groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: up == 0\n        fro: 5m\n",
		"bad template":  "groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: up == 0\n        annotations:\n          summary: '{{ $value | nosuchfunc }}'\n",
	} {
		_, errs := rulefmt.Parse([]byte(yml), false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.NewTextHandler(io.Discard, nil)))
		if len(errs) == 0 {
			t.Errorf("%s: accepted", name)
		}
	}
	// And the name check really rejects unknown metrics and labels.
	names := exported(t)
	for _, expr := range []string{`hookledger_nope_total`, `rate(hookledger_deliveries_total{reasons="x"}[5m])`, `hookledger_writer_batch_size_bucket{status="x"}`} {
		r := &recorder{}
		checkQuery(r, "test", expr, names)
		if len(r.errs) == 0 {
			t.Errorf("checkQuery accepted %s", expr)
		}
	}
}

type recorder struct{ errs []string }

func (r *recorder) Errorf(format string, args ...any) { r.errs = append(r.errs, format) }

type dashboard struct {
	Title      string `json:"title"`
	UID        string `json:"uid"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID      int    `json:"id"`
		Type    string `json:"type"`
		Title   string `json:"title"`
		GridPos struct {
			H, W, X, Y int
		} `json:"gridPos"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// Grafana variables, replaced by what Grafana would send.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "6h", "$instance", ".*", "$provider", ".*")

func TestGrafanaDashboardQueriesExportedMetrics(t *testing.T) {
	b, err := os.ReadFile("grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	if d.Title == "" || d.UID == "" {
		t.Error("dashboard needs a title and a uid")
	}
	names := exported(t)
	ids := map[int]bool{}
	queried := map[string]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.X+p.GridPos.W > 24 || p.GridPos.W == 0 {
			t.Errorf("panel %q: gridPos %+v outside the 24-column grid", p.Title, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			checkQuery(t, "panel "+p.Title, grafanaVars.Replace(tg.Expr), names)
			for _, m := range regexp.MustCompile(`hookledger_[a-z_]+`).FindAllString(tg.Expr, -1) {
				queried[strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(m, "_bucket"), "_sum"), "_count")] = true
			}
		}
	}
	// Every hookledger metric is on the dashboard somewhere.
	for name := range names {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
		if strings.HasPrefix(name, "hookledger_") && !queried[base] && base != "hookledger_db_stats_up" && base != "hookledger_tls_reloads_total" {
			t.Errorf("%s is exported but on no dashboard panel", base)
		}
	}
	for _, v := range d.Templating.List {
		if q, ok := v.Query.(map[string]any); ok {
			expr := strings.TrimSuffix(strings.TrimPrefix(q["query"].(string), "label_values("), ")")
			sel, _, _ := strings.Cut(expr, "}")
			if strings.Contains(expr, "}") {
				sel += "}"
			} else {
				sel, _, _ = strings.Cut(expr, ",")
			}
			checkQuery(t, "variable "+v.Name, grafanaVars.Replace(sel), names)
		}
	}
}

// unitDirectives reads a systemd unit into key -> values.
func unitDirectives(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "[") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Errorf("%s: not a directive: %q", path, line)
			continue
		}
		d[k] = append(d[k], v)
	}
	return d
}

func TestSystemdUnit(t *testing.T) {
	d := unitDirectives(t, "hookledger.service")
	for k, want := range map[string]string{
		"User":            "hookledger",
		"StateDirectory":  "hookledger",
		"ProtectSystem":   "strict",
		"Restart":         "on-failure",
		"NoNewPrivileges": "yes",
		"ProtectHome":     "yes",
		"PrivateTmp":      "yes",
		"ExecReload":      "/bin/kill -HUP $MAINPID",
		"KillSignal":      "SIGTERM",
	} {
		if got := d[k]; len(got) != 1 || got[0] != want {
			t.Errorf("%s=%v, want %s", k, got, want)
		}
	}
	if len(d["ExecStart"]) != 1 || !strings.HasSuffix(strings.Fields(d["ExecStart"][0])[0], "/hookledger") {
		t.Errorf("ExecStart=%v", d["ExecStart"])
	}
	// Longer than serve's 30 s drain plus the replica's shutdown sync.
	stop, err := time.ParseDuration(d["TimeoutStopSec"][0])
	if err != nil || stop < 40*time.Second {
		t.Errorf("TimeoutStopSec=%v (%v), want at least 40s", d["TimeoutStopSec"], err)
	}

	// systemd's own checker, where installed.
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed")
	}
	dir := t.TempDir()
	unit, _ := os.ReadFile("hookledger.service")
	// verify wants ExecStart's binary to exist: point it at this test binary.
	self, _ := os.Executable()
	fixed := regexp.MustCompile(`(?m)^ExecStart=\S+`).ReplaceAllString(string(unit), "ExecStart="+self)
	if err := os.WriteFile(filepath.Join(dir, "hookledger.service"), []byte(fixed), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", filepath.Join(dir, "hookledger.service")).CombinedOutput()
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		// Without systemd as PID 1 (containers, CI) verify still parses the
		// unit; only complaints about the unit itself count.
		if strings.Contains(line, "hookledger.service") && !strings.Contains(line, "Failed to") {
			t.Errorf("systemd-analyze verify: %s", line)
		}
	}
	if err != nil {
		t.Logf("systemd-analyze verify exited with %v:\n%s", err, out)
	}
}
