package cni

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/ipledger/ipledger/buildinfo"
)

// Funcs returns the plugin's command handlers for skel.PluginMainFuncs.
// skel itself answers VERSION, checks the environment and the config's
// cniVersion (code 1 for CHECK below 0.4.0 and for STATUS and GC below
// 1.1.0) before calling them.
func Funcs() skel.CNIFuncs {
	return skel.CNIFuncs{Add: Add, Del: Del, Check: Check, GC: GC, Status: Status}
}

// SupportedVersions are the CNI spec versions the plugin serves: all of them.
var SupportedVersions = version.All

// About is the line the binary prints on stderr when run without
// CNI_COMMAND: the plugin name and the build it is, as `ipledger version`
// names it (the release's stamped version and commit).
func About() string {
	in := buildinfo.Get()
	return fmt.Sprintf("CNI IPAM plugin %s %s (commit %s): applies pre-decided addresses exactly (ipledger)", PluginType, in.Version, in.ShortCommit())
}

// Add answers ADD: it parses the configuration and prints the result (see
// [Config.Result]) converted to the configuration's cniVersion on stdout.
// Nothing is written to disk. Errors are *types.Error: code 7 for the
// configuration (see [ParseConfig]), code 1 when the result cannot be
// expressed at that version, code 5 when stdout cannot be written.
func Add(args *skel.CmdArgs) error {
	return add(args, os.Stdout)
}

func add(args *skel.CmdArgs, w io.Writer) error {
	cfg, err := ParseConfig(args.StdinData)
	if err != nil {
		return err
	}
	res, err := cfg.Result().GetAsVersion(cfg.CNIVersion)
	if err != nil {
		return types.NewError(types.ErrIncompatibleCNIVersion,
			fmt.Sprintf("%s: cannot express the result at cniVersion %q", PluginType, cfg.CNIVersion), err.Error())
	}
	if err := res.PrintTo(w); err != nil {
		return types.NewError(types.ErrIOFailure, PluginType+": cannot write the result", err.Error())
	}
	return nil
}

// Del answers DEL. The plugin holds no state, so there is nothing to release:
// it succeeds without reading the ipam object, so that a container can always
// be torn down, even when its configuration has since become invalid.
func Del(*skel.CmdArgs) error { return nil }

// GC answers GC (spec 1.1.0): the plugin holds no state, nothing is stale.
func GC(*skel.CmdArgs) error { return nil }

// Status answers STATUS (spec 1.1.0): the plugin depends on no daemon and has
// no pool to exhaust, so it is always ready to serve ADD.
func Status(*skel.CmdArgs) error { return nil }

// Check answers CHECK: the configuration must be valid (code 7 otherwise)
// and carry a prevResult (code 7 when absent, code 6 when it cannot be
// decoded), and prevResult must carry the configured addresses (see
// [Config.Verify]; code [ErrAddressMismatch] otherwise).
func Check(args *skel.CmdArgs) error {
	cfg, err := ParseConfig(args.StdinData)
	if err != nil {
		return err
	}
	prev, err := parsePrevResult(cfg.CNIVersion, args.StdinData)
	if err != nil {
		return err
	}
	return cfg.Verify(prev)
}

// parsePrevResult reads the configuration's prevResult, written at
// cniVersion, and converts it to the current result version.
func parsePrevResult(cniVersion string, data []byte) (*current.Result, error) {
	var conf struct {
		PrevResult json.RawMessage `json:"prevResult"`
	}
	if err := json.Unmarshal(data, &conf); err != nil || !present(conf.PrevResult) {
		return nil, invalid("CHECK needs prevResult (the result of the preceding ADD) in the configuration")
	}
	pc := &types.PluginConf{CNIVersion: cniVersion}
	if err := json.Unmarshal(conf.PrevResult, &pc.RawPrevResult); err != nil || pc.RawPrevResult == nil {
		return nil, types.NewError(types.ErrDecodingFailure, PluginType+": prevResult is not a JSON object", clipRaw(conf.PrevResult))
	}
	if err := version.ParsePrevResult(pc); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, PluginType+": cannot decode prevResult", err.Error())
	}
	prev, err := current.NewResultFromResult(pc.PrevResult)
	if err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, PluginType+": cannot convert prevResult to version "+current.ImplementedSpecVersion, err.Error())
	}
	return prev, nil
}
