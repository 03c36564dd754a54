package allocator

// ExpectedMachines: a host the site expects to ingest, with its NICo fields
// and the per-DPU loopback reservations of docs/reservations.md. Every door (REST
// create/PUT/PATCH/replace-all, the CLI through REST, the console) writes
// through the functions of this file, and every one of them validates with
// the same code (validateRecords) inside the write's transaction, holding
// the row locks of the pools lo-ip and lo-ip-v6, so two operators racing to
// reserve one value cannot both win. The unique constraints of
// expected_dpus (serial_number, loopback_ip, loopback_ip_v6 and their sort
// keys) and of expected_machines (bmc_mac_address) back the rules in the
// database; their violations surface as 409 naming the field.

// Limits on free-text fields (docs/reservations.md "The records").
const (
	emMaxText        = 256
	emMaxDescription = 1024
	emMaxLabels      = 64
	emMaxDPUs        = 16
)

// Label is one metadata label.
type Label struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Metadata is the NICo metadata of an ExpectedMachine. An empty metadata is
// {"name": "", "description": "", "labels": []} (docs/api.md).
type Metadata struct {
	Name        string  `json:"name"`
	Description string  `json:"description"`
	Labels      []Label `json:"labels"`
}

// ExpectedDPU is one expected DPU: its serial number (globally unique) and
// optional loopback reservations, an IPv4 address of pool lo-ip and an IPv6
// address of pool lo-ip-v6 (docs/reservations.md). Absent reservations are null
// in responses; in requests null, absent and "" all mean "none".
type ExpectedDPU struct {
	SerialNumber string  `json:"serial_number"`
	LoopbackIP   *string `json:"loopback_ip"`
	LoopbackIPv6 *string `json:"loopback_ip_v6"`
}

// ExpectedMachine is an ExpectedMachine as every response shows it
// (docs/api.md). The BMC password is write-only: responses say only
// whether one is stored (bmc_password_set). ExpectedDPUs is never null.
type ExpectedMachine struct {
	ID                       string        `json:"id"`
	Version                  int64         `json:"version"`
	BmcMacAddress            string        `json:"bmc_mac_address"`
	BmcUsername              string        `json:"bmc_username"`
	BmcPasswordSet           bool          `json:"bmc_password_set"`
	ChassisSerialNumber      string        `json:"chassis_serial_number"`
	FallbackDPUSerialNumbers []string      `json:"fallback_dpu_serial_numbers"`
	Metadata                 Metadata      `json:"metadata"`
	SkuID                    *string       `json:"sku_id"`
	ExpectedDPUs             []ExpectedDPU `json:"expected_dpus"`
}

// ExpectedMachineSpec is an ExpectedMachine as a client sends it (POST,
// PUT, one record of a replace-all file). Compatibility with older clients
// (docs/reservations.md): ExpectedDPUs nil (absent, or null in a PUT) keeps the
// stored list and an empty slice clears it; BmcPassword nil or "" keeps the
// stored password. Every other field absent is reset to empty by a PUT.
// Read-only fields a client echoes back (id, version, bmc_password_set) are
// ignored.
type ExpectedMachineSpec struct {
	BmcMacAddress            string         `json:"bmc_mac_address"`
	BmcUsername              string         `json:"bmc_username"`
	BmcPassword              *string        `json:"bmc_password,omitempty"`
	ChassisSerialNumber      string         `json:"chassis_serial_number"`
	FallbackDPUSerialNumbers []string       `json:"fallback_dpu_serial_numbers"`
	Metadata                 *Metadata      `json:"metadata,omitempty"`
	SkuID                    *string        `json:"sku_id"`
	ExpectedDPUs             *[]ExpectedDPU `json:"expected_dpus,omitempty"`
}

// ExpectedMachineFilter selects ExpectedMachines; empty fields match all.
type ExpectedMachineFilter struct {
	// BmcMacAddress matches exactly (any case, ':' or '-').
	BmcMacAddress string
	// SerialNumber matches the chassis serial, an expected DPU's serial or
	// a fallback DPU serial, exactly.
	SerialNumber string
	// Label is "key" (any value) or "key=value".
	Label string
	// Search is a case-insensitive substring of the BMC MAC, chassis
	// serial, metadata name or an expected DPU's serial (console search);
	// part of a MAC in another notation (00-50-0, 0050.0, 00500) also
	// finds the BMC MACs holding it (ident.MACFragments).
	Search string
	// Limit defaults to 100 and is capped at 1000.
	Limit int
	// Cursor is the next_cursor of the previous page.
	Cursor string
}

// ExpectedMachinePage is one page of ExpectedMachines ordered by BMC MAC.
type ExpectedMachinePage struct {
	Items      []ExpectedMachine `json:"items"`
	NextCursor string            `json:"next_cursor,omitempty"`
}
