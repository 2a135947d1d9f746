// Ask the consent sidecar whether an operation is allowed. Go, net/http and the standard library only.
//
//	go run consent_check.go http://127.0.0.1:7700 alice marketing-email [timeout_ms]
//	go run consent_check.go unix:/var/run/cs/decision.sock alice marketing-email
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

const maxBody = 65536

// Result: Allowed only for a 200 whose body is exactly {"decision":"ALLOW","configKey":<asked>,"validUntil":<integer epoch ms, in the future>}.
type Result struct {
	Allowed    bool
	Kind       string // allow, deny, no_decision, invalid_request, unexpected_answer, unavailable
	Cause      string
	ValidUntil int64
}

// Checker holds one kept-alive client; make one and share it.
type Checker struct {
	client *http.Client
	base   string
}

func NewChecker(baseURL string, timeout time.Duration) *Checker {
	transport := &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 16}
	base := strings.TrimSuffix(baseURL, "/")
	if strings.HasPrefix(baseURL, "unix:") {
		path := strings.TrimPrefix(baseURL, "unix:")
		transport.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}
		base = "http://localhost"
	}
	noRedirects := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Checker{client: &http.Client{Transport: transport, Timeout: timeout, CheckRedirect: noRedirects}, base: base}
}

func (c *Checker) Check(userReference, configKey string) Result {
	body, _ := json.Marshal(map[string]string{"userReference": userReference, "configKey": configKey})
	res, err := c.client.Post(c.base+"/v1/authorization/check", "application/json", bytes.NewReader(body))
	if err != nil {
		return Result{Kind: "unavailable", Cause: err.Error()}
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, maxBody+1))
	if err != nil {
		return Result{Kind: "unavailable", Cause: err.Error()}
	}
	if len(raw) > maxBody {
		return Result{Kind: "unexpected_answer", Cause: "body_too_large"}
	}
	doc, jsonErr := strictObject(raw)
	switch {
	case res.StatusCode == 503:
		if cause, ok := doc["error"].(string); ok && jsonErr == nil {
			return Result{Kind: "no_decision", Cause: cause}
		}
		return Result{Kind: "no_decision", Cause: "unspecified"}
	case res.StatusCode == 400:
		return Result{Kind: "invalid_request", Cause: "invalid_request"}
	case res.StatusCode != 200:
		return Result{Kind: "unexpected_answer", Cause: "status " + strconv.Itoa(res.StatusCode)}
	}
	if media, _, _ := mime.ParseMediaType(res.Header.Get("content-type")); media != "application/json" || jsonErr != nil {
		return Result{Kind: "unexpected_answer", Cause: "not_json"}
	}
	return decision(doc, configKey)
}

func decision(doc map[string]interface{}, configKey string) Result {
	switch {
	case doc["decision"] == "ALLOW" && exactly(doc, "decision", "configKey", "validUntil"):
		if doc["configKey"] != configKey {
			return Result{Kind: "unexpected_answer", Cause: "other_config_key"}
		}
		n, ok := doc["validUntil"].(json.Number)
		validUntil, err := strconv.ParseInt(string(n), 10, 64)
		if !ok || err != nil || validUntil <= 0 || validUntil > 1<<53-1 {
			return Result{Kind: "unexpected_answer", Cause: "malformed"}
		}
		if validUntil <= time.Now().UnixMilli() {
			return Result{Kind: "unexpected_answer", Cause: "expired"}
		}
		return Result{Allowed: true, Kind: "allow", ValidUntil: validUntil}
	case doc["decision"] == "DENY" && exactly(doc, "decision", "configKey") && doc["configKey"] == configKey:
		return Result{Kind: "deny", Cause: "evaluated"}
	case doc["decision"] == "DENY" && exactly(doc, "decision", "reason") && doc["reason"] != "":
		if reason, ok := doc["reason"].(string); ok {
			return Result{Kind: "deny", Cause: reason}
		}
	}
	return Result{Kind: "unexpected_answer", Cause: "malformed"}
}

func exactly(doc map[string]interface{}, names ...string) bool {
	for _, n := range names {
		if _, ok := doc[n]; !ok {
			return false
		}
	}
	return len(doc) == len(names)
}

// strictObject: one JSON object, UTF-8, in which no object at any depth names a member twice
// (encoding/json keeps the last of duplicates: {"decision":"DENY","decision":"ALLOW"} would read as ALLOW).
func strictObject(raw []byte) (map[string]interface{}, error) {
	if !utf8.Valid(raw) { // encoding/json would replace bad bytes instead of refusing them
		return nil, errors.New("not UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := strictValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("more than one JSON value")
	}
	obj, ok := v.(map[string]interface{})
	if !ok {
		return nil, errors.New("not a JSON object")
	}
	return obj, nil
}

func strictValue(dec *json.Decoder) (interface{}, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		obj := map[string]interface{}{}
		for dec.More() {
			name, err := dec.Token()
			if err != nil {
				return nil, err
			}
			if _, twice := obj[name.(string)]; twice {
				return nil, fmt.Errorf("member %q named twice", name)
			}
			if obj[name.(string)], err = strictValue(dec); err != nil {
				return nil, err
			}
		}
		_, err = dec.Token()
		return obj, err
	case json.Delim('['):
		var arr []interface{}
		for dec.More() {
			v, err := strictValue(dec)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		_, err = dec.Token()
		return arr, err
	}
	return tok, nil
}

func main() {
	timeout := 2 * time.Second
	if len(os.Args) > 4 {
		ms, _ := strconv.Atoi(os.Args[4])
		timeout = time.Duration(ms) * time.Millisecond
	}
	r := NewChecker(os.Args[1], timeout).Check(os.Args[2], os.Args[3])
	if r.Allowed {
		fmt.Printf("allowed %d\n", r.ValidUntil)
		os.Exit(0)
	}
	fmt.Printf("not_allowed %s %s\n", r.Kind, r.Cause)
	os.Exit(1)
}
