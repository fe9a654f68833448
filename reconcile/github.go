package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// GitHubSource reads a webhook's recent deliveries with GitHub's REST API:
// GET /repos/{owner}/{repo}/hooks/{hook_id}/deliveries (or /orgs/{org}/…),
// newest first, paginated by an opaque cursor in the Link header. GitHub
// never retries a failed delivery by itself and the list holds no payloads,
// so a missing delivery is repaired by asking GitHub to send it again:
// POST …/deliveries/{delivery_id}/attempts. The redelivery then arrives as an
// ordinary signed webhook. GitHub keeps deliveries for 3 days.
type GitHubSource struct {
	Client Client // BaseURL default https://api.github.com; Token is a token with admin:repo_hook (or org hook) read/write
	// Hook is the hook's path under the API: "repos/OWNER/REPO/hooks/ID" or "orgs/ORG/hooks/ID".
	Hook    string
	Types   []string // only these event names (X-GitHub-Event); empty: every event
	PerPage int      // 1..100; default 100
}

// NewGitHubSource returns a source for a repository's hook (repo "owner/name")
// or, when repo is empty, an organization's.
func NewGitHubSource(baseURL, token, repo, org string, hookID int64) *GitHubSource {
	hook := "repos/" + repo
	if repo == "" {
		hook = "orgs/" + org
	}
	h := http.Header{}
	h.Set("Accept", "application/vnd.github+json")
	h.Set("X-GitHub-Api-Version", "2022-11-28")
	return &GitHubSource{
		Client: Client{BaseURL: baseURL, Token: token, Header: h, RequestIDHeader: "X-GitHub-Request-Id"},
		Hook:   fmt.Sprintf("%s/hooks/%d", hook, hookID),
	}
}

// Name implements Source.
func (s *GitHubSource) Name() string { return "github-deliveries" }

type githubDelivery struct {
	ID          int64     `json:"id"`
	GUID        string    `json:"guid"`
	DeliveredAt time.Time `json:"delivered_at"`
	Redelivery  bool      `json:"redelivery"`
	StatusCode  int       `json:"status_code"`
	Event       string    `json:"event"`
	Action      string    `json:"action"`
}

// List implements Source. Events carry no body: the event id is the delivery
// GUID (X-GitHub-Delivery, the same for every redelivery of an event) and
// DeliveryID the numeric id to redeliver.
func (s *GitHubSource) List(ctx context.Context, w Window, cursor string) (Page, error) {
	per := s.PerPage
	if per <= 0 || per > 100 {
		per = 100
	}
	q := url.Values{}
	q.Set("per_page", strconv.Itoa(per))
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	path := "/" + s.Hook + "/deliveries"
	res, err := s.Client.do(ctx, "GET", path, q)
	if err != nil {
		return Page{}, err
	}
	var ds []githubDelivery
	if err := json.Unmarshal(res.Body, &ds); err != nil {
		return Page{}, fmt.Errorf("GET %s: not a list of deliveries: %s", path, s.Client.snippet(res.Body))
	}
	p := Page{RequestID: res.RequestID, Next: nextCursor(res.Header.Get("Link"))}
	for i, d := range ds {
		if d.GUID == "" || d.ID == 0 {
			return Page{}, fmt.Errorf("GET %s: delivery [%d] has no id or guid", path, i)
		}
		if d.DeliveredAt.Before(w.From) {
			// Newest first: everything after this is older still.
			p.Next = ""
			break
		}
		if d.DeliveredAt.After(w.To) || !wanted(s.Types, d.Event) {
			continue
		}
		p.Events = append(p.Events, Event{ID: d.GUID, Type: d.Event, Created: d.DeliveredAt.UTC(), DeliveryID: strconv.FormatInt(d.ID, 10)})
	}
	return p, nil
}

// Redeliver implements Redeliverer: GitHub answers 202 and sends the
// delivery again, with the same GUID, to the hook's URL.
func (s *GitHubSource) Redeliver(ctx context.Context, e Event) (int, error) {
	if e.DeliveryID == "" {
		return 0, fmt.Errorf("event %s has no delivery id to redeliver", e.ID)
	}
	res, err := s.Client.do(ctx, "POST", "/"+s.Hook+"/deliveries/"+url.PathEscape(e.DeliveryID)+"/attempts", nil)
	if err != nil {
		return 0, err
	}
	return res.Code, nil
}

// nextCursor finds the cursor of the rel="next" link in a Link header.
func nextCursor(link string) string {
	for _, part := range strings.Split(link, ",") {
		target, params, ok := strings.Cut(part, ";")
		if !ok || !strings.Contains(strings.ReplaceAll(params, " ", ""), `rel="next"`) {
			continue
		}
		target = strings.Trim(strings.TrimSpace(target), "<>")
		if u, err := url.Parse(target); err == nil {
			return u.Query().Get("cursor")
		}
	}
	return ""
}

func wanted(types []string, t string) bool {
	if len(types) == 0 {
		return true
	}
	for _, w := range types {
		if w == t {
			return true
		}
	}
	return false
}
