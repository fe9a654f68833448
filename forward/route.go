package forward

import (
	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/custody"
)

// Router is custody's router for destinations: the names of those whose
// events select provider's eventType, in config order. nil when there are
// none, so a writer without destinations does no work per delivery.
func Router(destinations []config.Destination) custody.Router {
	if len(destinations) == 0 {
		return nil
	}
	ds := append([]config.Destination(nil), destinations...)
	return func(provider, eventType string) []string {
		var names []string
		for i := range ds {
			if ds[i].Matches(provider, eventType) {
				names = append(names, ds[i].Name)
			}
		}
		return names
	}
}

// Names lists the destinations' names.
func Names(destinations []config.Destination) []string {
	names := make([]string, len(destinations))
	for i, d := range destinations {
		names[i] = d.Name
	}
	return names
}
