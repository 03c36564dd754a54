package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/apijson"
	"github.com/ipledger/ipledger/strictjson"
)

// The flags of `ipledger expected-machine add|patch|update`: today's
// spellings and NICo's admin-CLI ones side by side (nicoAliases), resolved
// into one request body. Giving both spellings of one field is an error.

// parseExpectedDPUFlag reads SERIAL[,ipv4=A][,ipv6=B] (also loopback_ip= and
// loopback_ip_v6=). The values are checked by the server.
func parseExpectedDPUFlag(s string) (allocator.ExpectedDPU, error) {
	parts := strings.Split(s, ",")
	d := allocator.ExpectedDPU{SerialNumber: strings.TrimSpace(parts[0])}
	if d.SerialNumber == "" || strings.Contains(d.SerialNumber, "=") {
		return d, fmt.Errorf("--expected-dpu %q: want SERIAL[,ipv4=A][,ipv6=B]", s)
	}
	for _, p := range parts[1:] {
		k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
		v = strings.TrimSpace(v)
		if !ok || v == "" {
			return d, fmt.Errorf("--expected-dpu %q: %q is not KEY=VALUE (ipv4=A or ipv6=B)", s, p)
		}
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "ipv4", "loopback_ip":
			if d.LoopbackIP != nil {
				return d, fmt.Errorf("--expected-dpu %q: ipv4 given twice", s)
			}
			d.LoopbackIP = &v
		case "ipv6", "loopback_ip_v6":
			if d.LoopbackIPv6 != nil {
				return d, fmt.Errorf("--expected-dpu %q: ipv6 given twice", s)
			}
			d.LoopbackIPv6 = &v
		default:
			return d, fmt.Errorf("--expected-dpu %q: unknown key %q (want ipv4 or ipv6)", s, k)
		}
	}
	return d, nil
}

// emFlags are the record fields add, patch and update take. Each field
// has today's flag and, where they differ, the spelling of NICo's admin
// CLI (-a/--bmc-mac-address, -s/--chassis-serial-number, …), so an
// operator's NICo habits work; giving both spellings of one field is an
// error rather than a silent choice.
type emFlags struct {
	mac, username, password, passwordFile, chassis, name, description, sku string
	fallback, labels, dpus                                                 []string
	clearDPUs                                                              bool
	ifMatch                                                                int64

	// NICo spellings, folded into the fields above by resolve.
	nicoMAC, nicoChassis, nicoName, nicoDescription, nicoSku, reservations string
	nicoFallback                                                           []string
	// changed is the set of fields given, by today's flag name.
	changed map[string]bool
}

// nicoAliases pairs today's flag with NICo's spelling of the same field.
var nicoAliases = [][2]string{
	{"bmc-mac", "bmc-mac-address"},
	{"chassis-serial", "chassis-serial-number"},
	{"fallback-dpu-serial", "fallback-dpu-serial-number"},
	{"name", "meta-name"},
	{"description", "meta-description"},
	{"sku", "sku-id"},
	{"expected-dpu", "dpu-loopback-reservations"},
}

// resolve folds the NICo spellings into today's fields and records which
// fields were given.
func (f *emFlags) resolve(cmd *cobra.Command) error {
	fl := cmd.Flags()
	f.changed = map[string]bool{}
	for _, n := range []string{"bmc-username", "bmc-password", "bmc-password-file", "label", "clear-expected-dpus", "dpu-loopback-reservations"} {
		f.changed[n] = fl.Changed(n)
	}
	for _, a := range nicoAliases {
		if fl.Changed(a[0]) && fl.Changed(a[1]) {
			return fmt.Errorf("--%s and --%s set the same field; give one of them", a[0], a[1])
		}
		f.changed[a[0]] = fl.Changed(a[0]) || fl.Changed(a[1])
	}
	if fl.Changed("bmc-mac-address") {
		f.mac = f.nicoMAC
	}
	if fl.Changed("chassis-serial-number") {
		f.chassis = f.nicoChassis
	}
	if fl.Changed("fallback-dpu-serial-number") {
		f.fallback = f.nicoFallback
	}
	if fl.Changed("meta-name") {
		f.name = f.nicoName
	}
	if fl.Changed("meta-description") {
		f.description = f.nicoDescription
	}
	if fl.Changed("sku-id") {
		f.sku = f.nicoSku
	}
	return nil
}

// parseReservations reads --dpu-loopback-reservations: a JSON array of
// {"dpu_serial_number", "loopback_ipv4", "loopback_ipv6"} (NICo's admin
// CLI), the whole list of expected DPUs; '[]' clears it. Unknown members
// are refused: a misspelt address must not silently become "none".
func parseReservations(s string) ([]allocator.ExpectedDPU, error) {
	const want = `want a JSON array like [{"dpu_serial_number":"MT1","loopback_ipv4":"10.0.0.1","loopback_ipv6":"fd00::1"}] ('[]' clears)`
	if strings.TrimSpace(string(strictjson.TrimBOM([]byte(s)))) == "" {
		return nil, fmt.Errorf("--dpu-loopback-reservations is empty: %s", want)
	}
	var in []struct {
		Serial string  `json:"dpu_serial_number"`
		V4     *string `json:"loopback_ipv4"`
		V6     *string `json:"loopback_ipv6"`
	}
	// The same strict decoder as every JSON body: a member given twice or
	// in another case is refused, not resolved by "the last one wins" or
	// a case-insensitive match.
	if err := apijson.Decode([]byte(s), &in, apijson.Options{RejectUnknown: true, What: "--dpu-loopback-reservations"}); err != nil {
		return nil, fmt.Errorf("--dpu-loopback-reservations: %s: %v", want, err)
	}
	if in == nil {
		return nil, fmt.Errorf("--dpu-loopback-reservations: %s: null is not a list", want)
	}
	out := make([]allocator.ExpectedDPU, 0, len(in))
	for _, d := range in {
		out = append(out, allocator.ExpectedDPU{SerialNumber: d.Serial, LoopbackIP: d.V4, LoopbackIPv6: d.V6})
	}
	return out, nil
}

func (f *emFlags) register(cmd *cobra.Command, patch bool) {
	fl := cmd.Flags()
	macHelp := "BMC MAC address"
	if patch {
		macHelp = "new BMC MAC address (without ID|BMC_MAC, -a/--bmc-mac-address selects the record instead)"
	}
	fl.StringVar(&f.mac, "bmc-mac", "", macHelp)
	fl.StringVarP(&f.nicoMAC, "bmc-mac-address", "a", "", "NICo spelling of --bmc-mac")
	fl.StringVarP(&f.username, "bmc-username", "u", "", "BMC user name")
	fl.StringVarP(&f.password, "bmc-password", "p", "", "BMC password (write-only; prefer --bmc-password-file)")
	fl.StringVar(&f.passwordFile, "bmc-password-file", "", "file holding the BMC password (- for stdin)")
	fl.StringVar(&f.chassis, "chassis-serial", "", "chassis serial number")
	fl.StringVarP(&f.nicoChassis, "chassis-serial-number", "s", "", "NICo spelling of --chassis-serial")
	fl.StringArrayVar(&f.fallback, "fallback-dpu-serial", nil, "fallback DPU serial number (repeatable)")
	fl.StringArrayVarP(&f.nicoFallback, "fallback-dpu-serial-number", "d", nil, "NICo spelling of --fallback-dpu-serial (repeatable)")
	fl.StringVar(&f.name, "name", "", "metadata name")
	fl.StringVar(&f.nicoName, "meta-name", "", "NICo spelling of --name")
	fl.StringVar(&f.description, "description", "", "metadata description")
	fl.StringVar(&f.nicoDescription, "meta-description", "", "NICo spelling of --description")
	fl.StringArrayVar(&f.labels, "label", nil, "metadata label KEY=VALUE or NICo's KEY:VALUE, or KEY alone (repeatable)")
	fl.StringVar(&f.sku, "sku", "", "SKU id")
	fl.StringVar(&f.nicoSku, "sku-id", "", "NICo spelling of --sku")
	dpuHelp := "SERIAL[,ipv4=A][,ipv6=B] (repeatable): an expected DPU with its optional loopback reservations"
	resHelp := `NICo's JSON list [{"dpu_serial_number","loopback_ipv4","loopback_ipv6"}], the whole list of expected DPUs`
	if patch {
		dpuHelp += "; given, it replaces the stored list; omitted keeps the stored reservations"
		resHelp += "; given, it replaces the stored list ('[]' clears); omitted keeps it"
	}
	fl.StringArrayVar(&f.dpus, "expected-dpu", nil, dpuHelp)
	fl.StringVar(&f.reservations, "dpu-loopback-reservations", "", resHelp)
	if patch {
		fl.BoolVar(&f.clearDPUs, "clear-expected-dpus", false, "remove every expected DPU and its reservations")
		fl.Int64Var(&f.ifMatch, "if-match", 0, "only change the record if it is still at this version (412 otherwise)")
	}
}

func (f *emFlags) passwordValue() (string, bool, error) {
	if f.passwordFile != "" {
		var data []byte
		var err error
		if f.passwordFile == "-" {
			data, err = io.ReadAll(os.Stdin)
		} else {
			data, err = os.ReadFile(f.passwordFile)
		}
		if err != nil {
			return "", false, fmt.Errorf("--bmc-password-file: %w", err)
		}
		return strings.TrimRight(string(data), "\r\n"), true, nil
	}
	return f.password, f.password != "", nil
}

func (f *emFlags) expectedDPUs() ([]allocator.ExpectedDPU, error) {
	if f.changed["dpu-loopback-reservations"] {
		return parseReservations(f.reservations)
	}
	out := []allocator.ExpectedDPU{}
	for _, s := range f.dpus {
		d, err := parseExpectedDPUFlag(s)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

func (f *emFlags) labelList() ([]allocator.Label, error) {
	out := []allocator.Label{}
	for _, l := range f.labels {
		// KEY=VALUE (ipledger) or KEY:VALUE (NICo), whichever separator
		// comes first; KEY alone is a label without a value.
		sep := "="
		if c := strings.Index(l, ":"); c >= 0 && (!strings.Contains(l, "=") || c < strings.Index(l, "=")) {
			sep = ":"
		}
		k, v, _ := strings.Cut(l, sep)
		if strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("--label %q: want KEY=VALUE, KEY:VALUE or KEY", l)
		}
		out = append(out, allocator.Label{Key: strings.TrimSpace(k), Value: v})
	}
	return out, nil
}

// patchBody builds a JSON merge patch from the flags the user gave
// (resolve first). selectedByMAC: -a/--bmc-mac-address picked the record,
// so it is not a new MAC.
func (f *emFlags) patchBody(selectedByMAC bool) (map[string]any, error) {
	ch := func(n string) bool { return f.changed[n] }
	p := map[string]any{}
	if ch("bmc-mac") && !selectedByMAC {
		p["bmc_mac_address"] = f.mac
	}
	if ch("bmc-username") {
		p["bmc_username"] = f.username
	}
	if ch("bmc-password") || ch("bmc-password-file") {
		pw, _, err := f.passwordValue()
		if err != nil {
			return nil, err
		}
		p["bmc_password"] = pw
	}
	if ch("chassis-serial") {
		p["chassis_serial_number"] = f.chassis
	}
	if ch("fallback-dpu-serial") {
		p["fallback_dpu_serial_numbers"] = f.fallback
	}
	if ch("sku") {
		if f.sku == "" {
			p["sku_id"] = nil
		} else {
			p["sku_id"] = f.sku
		}
	}
	meta := map[string]any{}
	if ch("name") {
		meta["name"] = f.name
	}
	if ch("description") {
		meta["description"] = f.description
	}
	if ch("label") {
		l, err := f.labelList()
		if err != nil {
			return nil, err
		}
		meta["labels"] = l
	}
	if len(meta) > 0 {
		p["metadata"] = meta
	}
	if f.clearDPUs && ch("expected-dpu") {
		return nil, fmt.Errorf("--clear-expected-dpus and --expected-dpu/--dpu-loopback-reservations contradict each other")
	}
	if f.clearDPUs {
		p["expected_dpus"] = []any{}
	} else if ch("expected-dpu") {
		d, err := f.expectedDPUs()
		if err != nil {
			return nil, err
		}
		p["expected_dpus"] = d
	}
	return p, nil
}
