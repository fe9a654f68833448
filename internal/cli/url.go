package cli

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/hookledger/hookledger/config"
)

// serverURL is where a client command (send, ingest, bench) posts: --url
// (or HOOKLEDGER_URL) when given, else where HOOKLEDGER_LISTEN (which steers
// serve) serves, else where the config's listen serves (listen ":9000" is
// http://localhost:9000), else the flag's default. A
// command that takes its secret from the config so also finds the receiver
// the config describes. path is added unless the URL already holds mark (a
// full URL may be given).
func serverURL(c *cli.Context, mark, path string) (string, error) {
	url := c.String("url")
	if !c.IsSet("url") {
		if l := os.Getenv("HOOKLEDGER_LISTEN"); l != "" {
			url = listenURL(l)
		} else if file := configPath(c); file != "" {
			cfg, err := config.LoadSecretsOptional(file)
			if err != nil {
				return "", err
			}
			url = listenURL(cfg.Listen)
		}
	}
	if !strings.Contains(url, mark) {
		url = strings.TrimRight(url, "/") + path
	}
	return url, nil
}

// listenURL is the http:// URL of a listen address; an address on every
// interface is reached at localhost.
func listenURL(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "http://" + listen
	}
	switch host {
	case "", "0.0.0.0", "::":
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// postError says that a POST to url failed, and where the URL came from
// when nothing answered there.
func postError(url string, err error) error {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("POST %s: %w: is hookledger serve running there? (the URL is --url or HOOKLEDGER_URL, else HOOKLEDGER_LISTEN, else the config's listen)", url, err)
	}
	return fmt.Errorf("POST %s: %w", url, err)
}
