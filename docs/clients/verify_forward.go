// Verify that a webhook event came from the pod's consent sidecar. Go, the standard library only.
//
//	go run verify_forward.go 8080 /var/run/secrets/consent-sidecar/app-signing-secret
package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
)

var timestampForm = regexp.MustCompile(`^[0-9]{1,12}$`)
var signatureForm = regexp.MustCompile(`^v1=[0-9a-f]{64}$`)

// VerifyForward returns the event of a genuine, fresh forward of the sidecar, or an error. rawBody is
// the body as received, before any parsing; secrets are the lines of the app signing secret file
// (any one may have signed: rotation).
func VerifyForward(header http.Header, rawBody []byte, secrets []string, toleranceS int64) (map[string]interface{}, error) {
	timestamps, signatures := header.Values("x-consent-sidecar-timestamp"), header.Values("x-consent-sidecar-signature")
	if len(timestamps) != 1 || len(signatures) != 1 {
		return nil, errors.New("signature headers missing or repeated")
	}
	if !timestampForm.MatchString(timestamps[0]) || !signatureForm.MatchString(signatures[0]) {
		return nil, errors.New("malformed signature headers")
	}
	signedAt, _ := strconv.ParseInt(timestamps[0], 10, 64)
	if age := time.Now().Unix() - signedAt; age > toleranceS || -age > toleranceS {
		return nil, errors.New("timestamp outside the tolerance")
	}
	given, _ := hex.DecodeString(signatures[0][3:])
	matched := false
	for _, secret := range secrets { // every secret is compared, in constant time, even after a match
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte(timestamps[0] + "."))
		mac.Write(rawBody)
		matched = hmac.Equal(mac.Sum(nil), given) || matched
	}
	if !matched {
		return nil, errors.New("signature mismatch")
	}
	var event map[string]interface{}
	if err := json.Unmarshal(rawBody, &event); err != nil {
		return nil, err
	}
	if _, ok := event["id"].(string); !ok {
		return nil, errors.New("not an event")
	}
	return event, nil
}

func main() {
	text, err := os.ReadFile(os.Args[2])
	if err != nil {
		panic(err)
	}
	var secrets []string
	for _, line := range strings.Split(string(text), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			secrets = append(secrets, line)
		}
	}
	listener, err := net.Listen("tcp", "127.0.0.1:"+os.Args[1])
	if err != nil {
		panic(err)
	}
	fmt.Println("listening", listener.Addr().(*net.TCPAddr).Port)
	http.Serve(listener, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		event, err := VerifyForward(r.Header, raw, secrets, 300)
		if err != nil {
			fmt.Println("refused", err)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		fmt.Println("verified", event["id"], event["type"]) // handle it, idempotent by event["id"]
		w.WriteHeader(http.StatusNoContent)
	}))
}
