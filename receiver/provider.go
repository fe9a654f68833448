package receiver

import (
	"fmt"
	"time"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/scheme"
)

// Provider is a configured webhook sender with its keys decoded once.
type Provider struct {
	Name      string
	Scheme    scheme.Scheme
	Keys      [][]byte // current secrets, any of which may sign (rotation)
	Tolerance time.Duration
	MaxBody   int64
	MaxDepth  int // deepest nesting of arrays and objects a body may have
}

// NewProvider builds a provider from its validated configuration.
func NewProvider(c config.Provider) (*Provider, error) {
	s, err := scheme.New(c.Scheme, c.HMAC)
	if err != nil {
		return nil, fmt.Errorf("provider %s: %w", c.Name, err)
	}
	p := &Provider{Name: c.Name, Scheme: s, Tolerance: c.Tolerance.Duration, MaxBody: c.MaxBody, MaxDepth: c.MaxDepth}
	if p.MaxDepth == 0 { // a Provider built in code rather than by config.Parse
		p.MaxDepth = config.DefaultMaxDepth
	}
	for i, sec := range c.Secrets {
		k, err := s.Key(sec.Value)
		if err != nil {
			return nil, fmt.Errorf("provider %s: secret %d: %w", c.Name, i+1, err)
		}
		p.Keys = append(p.Keys, k)
	}
	return p, nil
}

// NewProviders builds every configured provider, keyed by name.
func NewProviders(cs []config.Provider) (map[string]*Provider, error) {
	m := make(map[string]*Provider, len(cs))
	for _, c := range cs {
		p, err := NewProvider(c)
		if err != nil {
			return nil, err
		}
		m[p.Name] = p
	}
	return m, nil
}
