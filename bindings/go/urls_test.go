package redquorum_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	redquorum "github.com/redquorum/redquorum/bindings/go"
)

// urlsWithSecrets are node URLs with each character that ends a part of a URL or changes its
// meaning, and a space, in the user, the password and sentinel_password; the secrets are L3FT
// and R1GHT. The text before a character in the user names this machine, should a URL parse
// with it as the host.
func urlsWithSecrets() []string {
	var urls []string
	for _, c := range "#/?&@:%+ " {
		for _, s := range [][2]string{{"redis", ""}, {"redis+sentinel", "/m"}, {"redis+cluster", ""}} {
			urls = append(urls,
				fmt.Sprintf("%s://localhost%cx:L3FT-R1GHT@127.0.0.1:1%s", s[0], c, s[1]),
				fmt.Sprintf("%s://u:L3FT%cR1GHT@127.0.0.1:1%s", s[0], c, s[1]))
		}
		urls = append(urls,
			fmt.Sprintf("redis+sentinel://127.0.0.1:1/m?sentinel_user=u&sentinel_password=L3FT%cR1GHT", c),
			fmt.Sprintf("redis+sentinel://127.0.0.1:1/m?sentinel_password=L3FT%cR1GHT&sentinel=127.0.0.1:2", c))
	}
	return urls
}

func showsSecret(text string) bool {
	return strings.Contains(text, "L3FT") || strings.Contains(text, "R1GHT")
}

func TestNoSecretShowsWhateverCharactersItHolds(t *testing.T) {
	refused := 0
	for _, url := range urlsWithSecrets() {
		c, err := redquorum.New([]string{url})
		if err != nil {
			refused++
			assertInvalid(t, url, err)
			if showsSecret(err.Error()) {
				t.Errorf("%s: the error shows %v", url, err)
			}
			continue
		}
		statuses, err := c.NodeStatus()
		if err != nil {
			t.Errorf("%s: NodeStatus: %v", url, err)
		}
		for _, s := range statuses {
			if showsSecret(s.Address) {
				t.Errorf("%s: the address shows %q", url, s.Address)
			}
		}
		c.Close()
	}
	if refused <= 20 {
		t.Errorf("only %d URLs refused: the table tests too little", refused)
	}
}

func TestResourceNamesAndURLsAreCappedInBytes(t *testing.T) {
	c, err := redquorum.New([]string{"redis://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	atCap := strings.Repeat("é", redquorum.MaxResourceName/2) // 2 bytes each
	over := atCap + "r"
	says := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, redquorum.ErrInvalidArgument) ||
			!strings.Contains(err.Error(), fmt.Sprintf("%d bytes", redquorum.MaxResourceName+1)) ||
			!strings.Contains(err.Error(), fmt.Sprint(redquorum.MaxResourceName)) || strings.Contains(err.Error(), "éé") {
			t.Errorf("%s: %.200v", what, err)
		}
	}
	if _, err := c.TryLock(atCap, 10*time.Second); errors.Is(err, redquorum.ErrInvalidArgument) {
		t.Errorf("a name of 4096 bytes: %v", err)
	}
	_, err = c.TryLock(over, 10*time.Second)
	says("TryLock", err)
	_, err = acquire(c, "r", 10*time.Second, redquorum.WithResources(over), redquorum.WithOnce())
	says("WithResources", err)
	_, err = c.Inspect(over)
	says("Inspect", err)
	_, err = c.ForceRelease(over, "")
	says("ForceRelease", err)

	huge := "redis://" + strings.Repeat("h", 1<<20) + ":1" // a host of 1 MiB
	hc, err := redquorum.New([]string{huge})
	if err == nil {
		hc.Close()
	}
	if !errors.Is(err, redquorum.ErrInvalidArgument) || !strings.Contains(err.Error(), fmt.Sprintf("%d bytes", len(huge))) ||
		!strings.Contains(err.Error(), fmt.Sprint(redquorum.MaxNodeURL)) || len(err.Error()) > 300 {
		t.Errorf("a URL of 1 MiB: %.300v", err)
	}
}
