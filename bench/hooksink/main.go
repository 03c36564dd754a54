// Command hooksink is a webhook receiver for the reliability scripts: it
// answers every POST with 204 and appends one line per delivery to -out:
// the revision, the delivery id, the event and the time received (Unix
// milliseconds), tab-separated. A delivery whose X-Ipledger-Signature does
// not match the body signed with -secret is answered 401 and logged as
// "badsig".
package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:18090", "address to listen on")
	out := flag.String("out", "deliveries.tsv", "file to append deliveries to")
	secret := flag.String("secret", "", "webhook secret; when set, signatures are checked")
	flag.Parse()
	f, err := os.OpenFile(*out, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		log.Fatal(err)
	}
	var mu sync.Mutex
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil || r.Method != http.MethodPost {
			http.Error(w, "want a POST with a body", http.StatusBadRequest)
			return
		}
		state := r.Header.Get("X-Ipledger-Event")
		if *secret != "" && !signed(*secret, body, r.Header.Get("X-Ipledger-Signature")) {
			state = "badsig"
		}
		mu.Lock()
		fmt.Fprintf(f, "%s\t%s\t%s\t%d\n", r.Header.Get("X-Ipledger-Revision"), r.Header.Get("X-Ipledger-Delivery"),
			state, time.Now().UnixMilli())
		mu.Unlock()
		if state == "badsig" {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	log.Fatal(http.ListenAndServe(*listen, nil))
}

// signed accepts "sha256=HEX" or a bare hex HMAC-SHA256 of body.
func signed(secret string, body []byte, header string) bool {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	want := hex.EncodeToString(m.Sum(nil))
	for _, part := range strings.Split(header, ",") {
		part = strings.TrimSpace(part)
		if i := strings.Index(part, "="); i >= 0 {
			part = part[i+1:]
		}
		if hmac.Equal([]byte(part), []byte(want)) {
			return true
		}
	}
	return false
}
