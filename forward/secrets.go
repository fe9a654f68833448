package forward

import (
	"strings"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/redact"
	"github.com/hookledger/hookledger/stripe"
)

// destinationSecrets are what a destination's requests carry or share with
// it that must never be stored or shown: its signing secrets, which the
// application holds too and may print in an error page of its own (whole, or
// the base64 after whsec_, as some libraries take it), and the credentials
// in its URL (sent as basic auth). A request's signatures are added per
// attempt (attempt).
func destinationSecrets(c config.Destination) *redact.Secrets {
	var values []string
	for _, s := range c.Secrets {
		values = append(values, s.Value, strings.TrimPrefix(s.Value, "whsec_"))
	}
	return redact.New(values...).WithURL(c.URL)
}

// Secrets are the secrets of cfg that the views (Status, List, Attempts)
// scrub from what they show, whatever stored it: every destination's and
// the Stripe client's (what the relay sends), and the admin tokens, which
// no request of the relay carries but which must not be shown either. The
// relay scrubs what it stores already; this is for
// rows an older version stored whole. A secret cfg could not resolve (a
// command that loads the config with LoadSecretsOptional) is missing here:
// the shapes redact recognises without knowing them still apply.
func Secrets(cfg *config.Config) *redact.Secrets {
	sets := []*redact.Secrets{redact.New(cfg.AdminTokens()...)}
	for _, d := range cfg.Destinations {
		sets = append(sets, destinationSecrets(d))
	}
	if s := cfg.Stripe; s != nil {
		sets = append(sets, (&stripe.Client{Base: s.APIBase, Key: s.APIKey.Value}).Secrets())
	}
	return redact.Join(sets...)
}
