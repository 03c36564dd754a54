package allocator

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
)

// NormalizeMAC accepts a 48-bit MAC address in any case, with ':' or '-'
// between the six octets, and returns it lower-case with ':' (docs/api.md); anything else is 422 invalid on field.
func NormalizeMAC(s, field string) (string, error) {
	in := strings.TrimSpace(s)
	if in == "" {
		return "", Errf(CodeInvalid, field, "%s is required", field)
	}
	sep := byte(':')
	if len(in) == 17 {
		sep = in[2]
	}
	ok := len(in) == 17 && (sep == ':' || sep == '-')
	if ok {
		for i := 2; i < 17; i += 3 {
			if in[i] != sep {
				ok = false
			}
		}
	}
	var hw net.HardwareAddr
	if ok {
		var err error
		hw, err = net.ParseMAC(strings.ReplaceAll(in, "-", ":"))
		ok = err == nil && len(hw) == 6
	}
	if !ok {
		return "", Errf(CodeInvalid, field, "%q is not a MAC address: want six hex octets separated by ':' or '-', e.g. 1a:1b:1c:1d:1e:1f", s)
	}
	return hw.String(), nil
}

// looksLikeMAC tells whether an {id} path segment is a MAC address rather
// than a UUID.
func looksLikeMAC(s string) bool {
	_, err := NormalizeMAC(s, "id")
	return err == nil
}

// DecodeExpectedMachineSpec reads one ExpectedMachine JSON object. Broken
// JSON is 400 bad_request; a field of the wrong JSON type is 422 invalid
// naming it with its index (expected_dpus[1].loopback_ip).
func DecodeExpectedMachineSpec(b []byte) (ExpectedMachineSpec, error) {
	return decodeSpec(b, "")
}

func decodeSpec(b []byte, prefix string) (ExpectedMachineSpec, error) {
	var s ExpectedMachineSpec
	var shape map[string]json.RawMessage
	if err := json.Unmarshal(b, &shape); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			if prefix != "" {
				return s, Errf(CodeInvalid, prefix, "%s must be a JSON object, not %s", prefix, te.Value)
			}
			return s, Errf(CodeBadRequest, "", "request body must be a JSON object, not %s", te.Value)
		}
		return s, Errf(CodeBadRequest, "", "request body is not valid JSON: %v", err)
	}
	if shape == nil {
		if prefix != "" {
			return s, Errf(CodeInvalid, prefix, "%s must be a JSON object, not null", prefix)
		}
		return s, Errf(CodeBadRequest, "", "request body must be a JSON object, not null")
	}
	// Decode expected_dpus element by element so that a type error names
	// its index.
	var dpus *[]ExpectedDpu
	if raw, ok := shape["expected_dpus"]; ok && string(raw) != "null" {
		var elems []json.RawMessage
		if err := json.Unmarshal(raw, &elems); err != nil {
			return s, Errf(CodeInvalid, joinField(prefix, "expected_dpus"), "expected_dpus must be a JSON array of objects")
		}
		list := make([]ExpectedDpu, 0, len(elems))
		for i, e := range elems {
			var d ExpectedDpu
			if err := json.Unmarshal(e, &d); err != nil {
				f := joinField(prefix, fmt.Sprintf("expected_dpus[%d]", i))
				var te *json.UnmarshalTypeError
				if errors.As(err, &te) && te.Field != "" {
					return s, Errf(CodeInvalid, f+"."+te.Field, "%s must be a JSON %s, not %s", te.Field, te.Type.String(), te.Value)
				}
				return s, Errf(CodeInvalid, f, "each expected DPU must be a JSON object {serial_number, loopback_ip, loopback_ip_v6}")
			}
			list = append(list, d)
		}
		dpus = &list
	}
	delete(shape, "expected_dpus")
	rest, _ := json.Marshal(shape)
	if err := json.Unmarshal(rest, &s); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return s, Errf(CodeInvalid, joinField(prefix, te.Field), "%s must be a JSON %s, not %s", te.Field, te.Type.String(), te.Value)
		}
		return s, Errf(CodeInvalid, prefix, "%v", err)
	}
	s.ExpectedDpus = dpus
	return s, nil
}

// ParseExpectedMachinesFile reads the NICo expected-machines file
// {"expected_machines": [...]} as is (the body of replace-all and the
// console's import). Errors name the record: expected_machines[3].bmc_username.
func ParseExpectedMachinesFile(b []byte) ([]ExpectedMachineSpec, error) {
	var file map[string]json.RawMessage
	if err := json.Unmarshal(b, &file); err != nil || file == nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) || (err == nil && file == nil) {
			return nil, Errf(CodeBadRequest, "", `the body must be a JSON object {"expected_machines": [...]}`)
		}
		return nil, Errf(CodeBadRequest, "", "the file is not valid JSON: %v", err)
	}
	raw, ok := file["expected_machines"]
	if !ok || string(raw) == "null" {
		return nil, Errf(CodeInvalid, "expected_machines", `expected_machines is required: the file format is {"expected_machines": [...]} (an empty list removes every ExpectedMachine)`)
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, Errf(CodeInvalid, "expected_machines", "expected_machines must be a JSON array")
	}
	out := make([]ExpectedMachineSpec, 0, len(elems))
	for i, e := range elems {
		s, err := decodeSpec(e, fmt.Sprintf("expected_machines[%d]", i))
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func joinField(prefix, f string) string {
	if prefix == "" {
		return f
	}
	if f == "" {
		return prefix
	}
	return prefix + "." + f
}

// ParseExpectedMachinesFileRecords reads the NICo file like
// ParseExpectedMachinesFile, but a record that does not decode (a type
// error, an unknown field) fails only itself: specs[i] is record i when
// bad[i] is nil, otherwise bad[i] is its error naming
// expected_machines[i]. The console's merge import uses it so that one
// broken record does not stop the others. err is set only when the file
// as a whole is unreadable.
func ParseExpectedMachinesFileRecords(b []byte) (specs []ExpectedMachineSpec, bad []error, err error) {
	var file map[string]json.RawMessage
	if err := json.Unmarshal(b, &file); err != nil || file == nil {
		_, perr := ParseExpectedMachinesFile(b)
		return nil, nil, perr
	}
	raw, ok := file["expected_machines"]
	var elems []json.RawMessage
	if !ok || string(raw) == "null" || json.Unmarshal(raw, &elems) != nil {
		_, perr := ParseExpectedMachinesFile(b)
		return nil, nil, perr
	}
	specs = make([]ExpectedMachineSpec, len(elems))
	bad = make([]error, len(elems))
	for i, e := range elems {
		specs[i], bad[i] = decodeSpec(e, fmt.Sprintf("expected_machines[%d]", i))
	}
	return specs, bad, nil
}
