package allocator

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/ipledger/ipledger/apijson"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/ident"
	"github.com/ipledger/ipledger/strictjson"
)

// NormalizeMAC reads a MAC address by the one rule of package ident and
// returns it lower-case with ':' (docs/api.md "MAC addresses"); anything
// else is 422 invalid on field.
func NormalizeMAC(s, field string) (string, error) {
	if strings.TrimSpace(s) == "" {
		return "", fault.Errf(fault.CodeInvalid, field, "%s is required", field)
	}
	mac, err := ident.ParseMAC(s)
	if err != nil {
		return "", fault.Errf(fault.CodeInvalid, field, "%q is not a MAC address: want %s", s, ident.MACRule)
	}
	return mac, nil
}

// looksLikeMAC tells whether an {id} path segment is a MAC address rather
// than a UUID.
func looksLikeMAC(s string) bool {
	_, err := NormalizeMAC(s, "id")
	return err == nil
}

// DecodeExpectedMachineSpec reads one ExpectedMachine JSON object with
// the strict rules of every door (package apijson): broken JSON is 400
// bad_request; a repeated or case-variant member name, or a member of the
// wrong JSON type, is 422 invalid naming its path
// (expected_dpus[1].loopback_ip). Members ipledger does not store are
// ignored, as NICo's own readers do.
func DecodeExpectedMachineSpec(b []byte) (ExpectedMachineSpec, error) {
	var s ExpectedMachineSpec
	b = strictjson.TrimBOM(b)
	if err := apijson.Check(b, apijson.Options{}); err != nil {
		return s, err
	}
	return s, decodeSpec(b, "", &s)
}

// decodeSpec decodes one record already checked by apijson.Check; prefix is
// its path in the file ("" for a body of its own).
func decodeSpec(b []byte, prefix string, s *ExpectedMachineSpec) error {
	if v := bytes.TrimSpace(b); string(v) == "null" || (len(v) > 0 && v[0] != '{') {
		got := "null"
		if string(v) != "null" {
			got = apijson.KindName(jsontext.Value(v).Kind(), nil)
		}
		if prefix != "" {
			return fault.Errf(fault.CodeInvalid, prefix, "%s must be a JSON object, not %s", prefix, got)
		}
		return fault.Errf(fault.CodeBadRequest, "", "request body must be a JSON object, not %s", got)
	}
	if err := jsonv2.Unmarshal(b, s); err != nil {
		return apijson.MapError(err, apijson.Options{Prefix: prefix})
	}
	if s.ExpectedDPUs != nil && len(*s.ExpectedDPUs) > 0 {
		// expected_dpus is ipledger's own member, which no NICo tool
		// fills with members of its own: one ipledger does not know is a
		// misspelling ("loopback_ipv6") that would drop a reservation
		// without a word, so it is refused naming its path.
		var raw struct {
			ExpectedDPUs []jsontext.Value `json:"expected_dpus"`
		}
		if err := jsonv2.Unmarshal(b, &raw); err != nil {
			return apijson.MapError(err, apijson.Options{Prefix: prefix})
		}
		for i, d := range raw.ExpectedDPUs {
			var known ExpectedDPU
			if err := jsonv2.Unmarshal(d, &known, jsonv2.RejectUnknownMembers(true)); err != nil {
				return apijson.MapError(err, apijson.Options{Prefix: strictjson.JoinField(prefix, fmt.Sprintf("expected_dpus[%d]", i))})
			}
		}
	}
	return nil
}

// expectedMachinesFile is the NICo file {"expected_machines": [...]}, each
// record kept raw so that one that does not decode names itself.
type expectedMachinesFile struct {
	ExpectedMachines *[]jsontext.Value `json:"expected_machines"`
}

// readExpectedMachinesFile checks the whole file (strict rules, with paths
// from its top: expected_machines[3].metadata.name) and splits it into
// records.
func readExpectedMachinesFile(b []byte) ([]jsontext.Value, error) {
	b = strictjson.TrimBOM(b)
	o := apijson.Options{What: "the file"}
	if err := apijson.Check(b, o); err != nil {
		return nil, err
	}
	if v := bytes.TrimSpace(b); len(v) == 0 || v[0] != '{' {
		return nil, fault.Errf(fault.CodeBadRequest, "", `the body must be a JSON object {"expected_machines": [...]}`)
	}
	var file expectedMachinesFile
	if err := jsonv2.Unmarshal(b, &file); err != nil {
		var se *jsonv2.SemanticError
		if errors.As(err, &se) && se.JSONPointer != "" {
			return nil, fault.Errf(fault.CodeInvalid, "expected_machines", "expected_machines must be a JSON array")
		}
		return nil, apijson.MapError(err, o)
	}
	if file.ExpectedMachines == nil {
		return nil, fault.Errf(fault.CodeInvalid, "expected_machines", `expected_machines is required: the file format is {"expected_machines": [...]} (an empty list removes every ExpectedMachine)`)
	}
	return *file.ExpectedMachines, nil
}

// ParseExpectedMachinesFile reads the NICo expected-machines file
// {"expected_machines": [...]} as is (the body of replace-all and the
// console's import). Errors name the record: expected_machines[3].bmc_username.
// A repeated or case-variant member name anywhere refuses the whole file.
func ParseExpectedMachinesFile(b []byte) ([]ExpectedMachineSpec, error) {
	elems, err := readExpectedMachinesFile(b)
	if err != nil {
		return nil, err
	}
	out := make([]ExpectedMachineSpec, len(elems))
	for i, e := range elems {
		if err := decodeSpec(e, fmt.Sprintf("expected_machines[%d]", i), &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ParseExpectedMachinesFileRecords reads the NICo file like
// ParseExpectedMachinesFile, but a record that does not decode (a type
// error) fails only itself: specs[i] is record i when bad[i] is nil,
// otherwise bad[i] is its error naming expected_machines[i]. The console's
// merge import uses it so that one broken record does not stop the others.
// err is set when the file as a whole is unreadable, and when a member
// name is repeated (or repeated in another case) anywhere in it: such a
// file is ambiguous about what its author meant, so none of it is taken.
func ParseExpectedMachinesFileRecords(b []byte) (specs []ExpectedMachineSpec, bad []error, err error) {
	elems, err := readExpectedMachinesFile(b)
	if err != nil {
		return nil, nil, err
	}
	specs = make([]ExpectedMachineSpec, len(elems))
	bad = make([]error, len(elems))
	for i, e := range elems {
		bad[i] = decodeSpec(e, fmt.Sprintf("expected_machines[%d]", i), &specs[i])
	}
	return specs, bad, nil
}
