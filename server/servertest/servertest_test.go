package servertest

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/ds4-go/ds4/server"
)

// TestStartTiny checks that the server answers over loopback with the
// configuration mod set.
func TestStartTiny(t *testing.T) {
	url := StartTiny(t, func(c *server.Config) { c.MaxBodyBytes = 64 })
	resp, err := http.Get(url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "deepseek-v4-flash") {
		t.Fatalf("/v1/models: %d %s", resp.StatusCode, body)
	}
	resp, err = http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(strings.Repeat(" ", 65)+"{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("a body over MaxBodyBytes: status %d, want 413", resp.StatusCode)
	}
}
