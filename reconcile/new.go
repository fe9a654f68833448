package reconcile

import (
	"fmt"

	"github.com/hookledger/hookledger/config"
)

// NewSource builds the source a provider's reconcile settings describe.
func NewSource(p config.Provider) (Source, error) {
	rc := p.Reconcile
	if rc == nil {
		return nil, fmt.Errorf("provider %q has no reconcile settings", p.Name)
	}
	switch rc.Source {
	case "stripe":
		s := NewStripeSource(rc.BaseURL, rc.APIKey.Value)
		s.Types = rc.Types
		return s, nil
	case "github":
		s := NewGitHubSource(rc.BaseURL, rc.APIKey.Value, rc.Repo, rc.Org, rc.HookID)
		s.Types = rc.Types
		return s, nil
	case "file":
		return &FileSource{Path: rc.File, IDPath: rc.IDPath, TypePath: rc.TypePath, TimePath: rc.TimePath, Types: rc.Types, MaxDepth: p.MaxDepth}, nil
	}
	return nil, fmt.Errorf("provider %q: unknown reconcile source %q", p.Name, rc.Source)
}

// ForProvider returns a reconciler for p with its configured window and
// overlap (src overrides the configured source when non-nil, e.g. --file).
func ForProvider(p config.Provider, src Source, base Reconciler) (*Reconciler, error) {
	if src == nil {
		var err error
		if src, err = NewSource(p); err != nil {
			return nil, err
		}
	}
	r := NewReconciler(p.Name, src, base.DB, base.Writer, base.Mapper, base.HandlerVersion)
	if p.Reconcile != nil {
		r.Window, r.Overlap = p.Reconcile.Window.Duration, p.Reconcile.Overlap.Duration
	}
	if base.Log != nil {
		r.Log = base.Log
	}
	if base.Now != nil {
		r.Now = base.Now
	}
	return r, nil
}
