package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

// newCNIIPAMCmd: ipledger cni-ipam show|watch OWNER_TYPE OWNER_ID (or
// --owner-type T --owner-id ID).
func newCNIIPAMCmd(cf *clientFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "cni-ipam", Short: "The galactic-ipam ipam object of an owner's addresses (docs/cni.md, docs/feed.md)"}
	var ownerType, ownerID, stateFile string
	show := &cobra.Command{
		Use: "show OWNER_TYPE OWNER_ID", Short: "Print the owner's ipam object once", Args: cobra.MaximumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ot, oid, err := ownerOf(args, ownerType, ownerID)
			if err != nil {
				return err
			}
			c, err := cf.client(cmd.OutOrStdout())
			if err != nil {
				return err
			}
			b, err := ownerIPAM(c, ot, oid)
			if err != nil {
				return err
			}
			_, err = c.out.Write(append(b, '\n'))
			return err
		},
	}
	watch := &cobra.Command{
		Use:   "watch OWNER_TYPE OWNER_ID [--state-file F]",
		Short: "Print the owner's ipam object now and every time its addresses change (one JSON line each)",
		Long: `watch prints the owner's ipam object, then follows the change feed
(GET /api/v1/events?after=R&wait=30s) and prints the object again each
time an allocation event concerns the owner and the object differs from
the one printed last. An owner without any address prints
{"type":"galactic-ipam","addresses":[]}. With --state-file it saves the feed revision it has
handled and the last object printed after each change, and resumes from
there after a restart, printing only what changed meanwhile.`,
		Args: cobra.MaximumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ot, oid, err := ownerOf(args, ownerType, ownerID)
			if err != nil {
				return err
			}
			c, err := cf.client(cmd.OutOrStdout())
			if err != nil {
				return err
			}
			c.http.Timeout = 90 * time.Second
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return watchIPAM(ctx.Done(), c, ot, oid, stateFile, c.out)
		},
	}
	for _, sub := range []*cobra.Command{show, watch} {
		sub.Flags().StringVar(&ownerType, "owner-type", "", "owner type, e.g. endpoint (instead of OWNER_TYPE OWNER_ID)")
		sub.Flags().StringVar(&ownerID, "owner-id", "", "owner id, e.g. pod-web-1 (with --owner-type)")
	}
	watch.Flags().StringVar(&stateFile, "state-file", "", "file keeping the last handled revision across restarts")
	cmd.AddCommand(show, watch)
	return cmd
}

// ownerOf reads the owner from OWNER_TYPE OWNER_ID, as `ipledger owner`
// takes it, or from --owner-type and --owner-id, which scripts written
// before keep using.
func ownerOf(args []string, ownerType, ownerID string) (string, string, error) {
	switch {
	case len(args) == 2 && ownerType == "" && ownerID == "":
		return args[0], args[1], nil
	case len(args) == 0 && ownerType != "" && ownerID != "":
		return ownerType, ownerID, nil
	}
	return "", "", fmt.Errorf("name the owner as OWNER_TYPE OWNER_ID, or with both --owner-type and --owner-id (not both ways)")
}

func ownerIPAM(c *client, ownerType, ownerID string) ([]byte, error) {
	var raw json.RawMessage
	if _, err := c.call("GET", "/api/v1/owners/"+esc(ownerType)+"/"+esc(ownerID)+"/cni-ipam", nil, "", nil, &raw); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// noAddresses is what watch prints for an owner that holds no address
// (the endpoint answers 404 then): the controller learns that the owner's
// addresses are gone.
const noAddresses = `{"type":"galactic-ipam","addresses":[]}`

func watchedIPAM(c *client, ownerType, ownerID string) ([]byte, error) {
	b, err := ownerIPAM(c, ownerType, ownerID)
	var ae *apiError
	if errors.As(err, &ae) && ae.Status == 404 {
		return []byte(noAddresses), nil
	}
	return b, err
}

// watchState is what --state-file keeps.
type watchState struct {
	Revision int64           `json:"revision"`
	Last     json.RawMessage `json:"last"`
}

func loadWatchState(path string) (*watchState, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var s watchState
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("--state-file %s: %w", path, err)
	}
	return &s, nil
}

func saveWatchState(path string, s *watchState) error {
	if path == "" {
		return nil
	}
	b, _ := json.Marshal(s)
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// concerns tells whether an allocation event's before or after names the
// owner (as holder or former holder).
func concerns(ev map[string]json.RawMessage, ownerType, ownerID string) bool {
	for _, side := range []string{"before", "after"} {
		var v map[string]any
		if json.Unmarshal(ev[side], &v) != nil || v == nil {
			continue
		}
		if v["owner_type"] == ownerType && v["owner_id"] == ownerID {
			return true
		}
		if v["former_owner_type"] == ownerType && v["former_owner_id"] == ownerID {
			return true
		}
	}
	return false
}

func watchIPAM(done <-chan struct{}, c *client, ownerType, ownerID, stateFile string, out io.Writer) error {
	st, err := loadWatchState(stateFile)
	if err != nil {
		return err
	}
	emit := func(b []byte) error {
		if _, err := out.Write(append(append([]byte(nil), b...), '\n')); err != nil {
			return err
		}
		st.Last = append(json.RawMessage(nil), b...)
		return nil
	}
	if st == nil {
		// A fresh watch: the current object, from the feed's head on.
		var log struct {
			Items []struct {
				Revision *int64 `json:"revision"`
			} `json:"items"`
		}
		if _, err := c.call("GET", "/api/v1/events?limit=1", nil, "", nil, &log); err != nil {
			return err
		}
		st = &watchState{}
		if len(log.Items) > 0 && log.Items[0].Revision != nil {
			st.Revision = *log.Items[0].Revision
		}
		b, err := watchedIPAM(c, ownerType, ownerID)
		if err != nil {
			return err
		}
		if err := emit(b); err != nil {
			return err
		}
		if err := saveWatchState(stateFile, st); err != nil {
			return err
		}
	}
	backoff := time.Second
	for {
		select {
		case <-done:
			return nil
		default:
		}
		q := url.Values{"after": {fmt.Sprint(st.Revision)}, "wait": {"30s"}, "limit": {"1000"}, "object_type": {"allocation"}}
		var page struct {
			Items     []map[string]json.RawMessage `json:"items"`
			NextAfter int64                        `json:"next_after"`
		}
		if _, err := c.call("GET", "/api/v1/events?"+q.Encode(), nil, "", nil, &page); err != nil {
			var ae *apiError
			if errors.As(err, &ae) && ae.Status < 500 {
				return err
			}
			fmt.Fprintf(os.Stderr, "ipledger cni-ipam watch: %v; retrying in %s\n", err, backoff)
			select {
			case <-done:
				return nil
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 30*time.Second)
			continue
		}
		backoff = time.Second
		changed := false
		for _, ev := range page.Items {
			if concerns(ev, ownerType, ownerID) {
				changed = true
			}
		}
		if changed {
			b, err := watchedIPAM(c, ownerType, ownerID)
			if err != nil {
				return err
			}
			if !bytes.Equal(b, st.Last) {
				if err := emit(b); err != nil {
					return err
				}
			}
		}
		st.Revision = page.NextAfter
		if err := saveWatchState(stateFile, st); err != nil {
			return err
		}
	}
}
