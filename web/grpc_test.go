package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"connectrpc.com/grpcreflect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/emptypb"
	"gorm.io/gorm"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/database/dbtest"
	"github.com/ipledger/ipledger/handlers"
	"github.com/ipledger/ipledger/models"
	"github.com/ipledger/ipledger/proto/gen/common"
	"github.com/ipledger/ipledger/proto/gen/forge"
	"github.com/ipledger/ipledger/proto/gen/forge/forgeconnect"
)

// grpcEnv is a real server on a loopback listener (HTTP/1.1 and HTTP/2
// cleartext, as `ipledger serve` runs it) with the REST helpers of
// emHTTP beside it, the pools lo-ip and lo-ip-v6, and one token per role.
type grpcEnv struct {
	*emHTTP
	base     string
	operator string
	db       *gorm.DB
}

func newGRPCEnv(t *testing.T, db *gorm.DB) *grpcEnv {
	h := newEMHTTP(t, db)
	env := &grpcEnv{emHTTP: h, operator: "em-test-operator-token-01", db: db}
	if _, err := h.server.auth.CreateToken(context.Background(), "ci-operator", auth.RoleOperator, env.operator); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := h.server.HTTPServer()
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	env.base = "http://" + ln.Addr().String()
	return env
}

// h2c is an HTTP client speaking HTTP/2 without TLS (prior knowledge), as
// gRPC clients do. Each call makes a client with its own connection.
func h2c() *http.Client {
	tr := &http.Transport{}
	tr.Protocols = new(http.Protocols)
	tr.Protocols.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: tr}
}

// client is a gRPC client (the gRPC protocol over HTTP/2) of ipledger's
// own schema, sending token as bearer metadata.
func (env *grpcEnv) client(token string) forgeconnect.ForgeClient {
	return forgeconnect.NewForgeClient(h2c(), env.base, connect.WithGRPC(), connect.WithInterceptors(bearer(token)))
}

func bearer(token string) connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			if token != "" {
				req.Header().Set("Authorization", "Bearer "+token)
			}
			return next(ctx, req)
		}
	}
}

func wantCode(t *testing.T, what string, err error, code connect.Code, msgPrefix string) {
	t.Helper()
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != code || !strings.HasPrefix(ce.Message(), msgPrefix) {
		t.Fatalf("%s: got %v, want %s with a message starting %q", what, err, code, msgPrefix)
	}
}

func (env *grpcEnv) auditCount() int64 {
	var n int64
	env.db.Model(&models.AuditEvent{}).Count(&n)
	return n
}

// The role table names exactly the RPCs of the service (a new RPC cannot
// be served without a role), and mutating RPCs need at least operator.
func TestGRPCRoutesCoverTheService(t *testing.T) {
	sd := forge.File_forge_forge_proto.Services().ByName("Forge")
	want := map[string]bool{}
	for i := 0; i < sd.Methods().Len(); i++ {
		want["/"+string(sd.FullName())+"/"+string(sd.Methods().Get(i).Name())] = true
	}
	for _, r := range GRPCRoutes() {
		if !want[r.Procedure] {
			t.Errorf("GRPCRoutes has %s, which forge.Forge does not declare", r.Procedure)
		}
		delete(want, r.Procedure)
		if !strings.Contains(r.Procedure, "/Get") && r.Role == auth.RoleViewer {
			t.Errorf("%s changes state but needs only %s", r.Procedure, r.Role)
		}
	}
	for p := range want {
		t.Errorf("RPC %s is not in GRPCRoutes", p)
	}
}

// Anonymous and unknown tokens are UNAUTHENTICATED on every RPC, a role
// below the RPC's is PERMISSION_DENIED (the same roles as REST), refused
// calls write nothing, and the audit actor is the token's, as on REST.
func TestGRPCAuthAndRoles(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		env := newGRPCEnv(t, db)
		ctx := context.Background()
		roleTok := map[auth.Role]string{auth.RoleViewer: env.viewer, auth.RoleOperator: env.operator, auth.RoleAdmin: env.admin}
		call := func(c forgeconnect.ForgeClient, proc string) error {
			em := &forge.ExpectedMachine{BmcMacAddress: "0a:00:00:00:0c:01"}
			req := &forge.ExpectedMachineRequest{BmcMacAddress: "0a:00:00:00:0c:01"}
			var err error
			switch proc {
			case forgeconnect.ForgeAddExpectedMachineProcedure:
				_, err = c.AddExpectedMachine(ctx, connect.NewRequest(em))
			case forgeconnect.ForgeUpdateExpectedMachineProcedure:
				_, err = c.UpdateExpectedMachine(ctx, connect.NewRequest(em))
			case forgeconnect.ForgeDeleteExpectedMachineProcedure:
				_, err = c.DeleteExpectedMachine(ctx, connect.NewRequest(req))
			case forgeconnect.ForgeGetExpectedMachineProcedure:
				_, err = c.GetExpectedMachine(ctx, connect.NewRequest(req))
			case forgeconnect.ForgeGetAllExpectedMachinesProcedure:
				_, err = c.GetAllExpectedMachines(ctx, connect.NewRequest(&emptypb.Empty{}))
			case forgeconnect.ForgeReplaceAllExpectedMachinesProcedure:
				_, err = c.ReplaceAllExpectedMachines(ctx, connect.NewRequest(&forge.ExpectedMachineList{ExpectedMachines: []*forge.ExpectedMachine{em}}))
			case forgeconnect.ForgeDeleteAllExpectedMachinesProcedure:
				_, err = c.DeleteAllExpectedMachines(ctx, connect.NewRequest(&emptypb.Empty{}))
			default:
				t.Fatalf("no call for %s", proc)
			}
			return err
		}
		before := env.auditCount()
		for _, r := range GRPCRoutes() {
			wantCode(t, r.Procedure+" anonymous", call(env.client(""), r.Procedure), connect.CodeUnauthenticated, "authentication required")
			wantCode(t, r.Procedure+" unknown token", call(env.client("ipl_not_a_token"), r.Procedure), connect.CodeUnauthenticated, "")
			for _, role := range []auth.Role{auth.RoleViewer, auth.RoleOperator} {
				if !role.Allows(r.Role) {
					wantCode(t, fmt.Sprintf("%s as %s", r.Procedure, role), call(env.client(roleTok[role]), r.Procedure), connect.CodePermissionDenied, "role "+string(role))
				}
			}
		}
		if n := env.auditCount(); n != before {
			t.Fatalf("refused calls wrote %d audit events", n-before)
		}
		// Each RPC's own role passes (it may still fail on its input).
		for _, r := range GRPCRoutes() {
			var ce *connect.Error
			if err := call(env.client(roleTok[r.Role]), r.Procedure); errors.As(err, &ce) &&
				(ce.Code() == connect.CodeUnauthenticated || ce.Code() == connect.CodePermissionDenied) {
				t.Errorf("%s as %s: %v", r.Procedure, r.Role, err)
			}
		}
		// The audit actor of a gRPC write is the token, as for REST.
		if _, err := env.client(env.operator).AddExpectedMachine(ctx, connect.NewRequest(&forge.ExpectedMachine{BmcMacAddress: "0a:00:00:00:0c:02"})); err != nil {
			t.Fatal(err)
		}
		var ev models.AuditEvent
		if err := db.Where("action = ?", "expected_machine.create").Order("id DESC").First(&ev).Error; err != nil || ev.Actor != "token:ci-operator" || ev.RequestID == "" {
			t.Fatalf("audit event of a gRPC create: %+v %v; want actor token:ci-operator and a request id", ev, err)
		}
	})
}

// oldForge is NICo's ExpectedMachine service as an older client knows it:
// built from web/testdata/nicoproto (fields 1 to 17, no field 100), as
// dynamic messages, so it shares nothing with ipledger's generated code.
type oldForge struct {
	svc   protoreflect.ServiceDescriptor
	http  *http.Client
	base  string
	token string
}

func (env *grpcEnv) oldClient(t *testing.T, token string) *oldForge {
	t.Helper()
	b, err := os.ReadFile("testdata/nicoproto/nico.binpb")
	if err != nil {
		t.Fatal(err)
	}
	var fds descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(b, &fds); err != nil {
		t.Fatal(err)
	}
	files, err := protodesc.NewFiles(&fds)
	if err != nil {
		t.Fatal(err)
	}
	d, err := files.FindDescriptorByName("forge.Forge")
	if err != nil {
		t.Fatal(err)
	}
	svc := d.(protoreflect.ServiceDescriptor)
	if svc.ParentFile().Messages().ByName("ExpectedMachine").Fields().ByNumber(100) != nil {
		t.Fatal("the older client's ExpectedMachine must not know field 100")
	}
	return &oldForge{svc: svc, http: h2c(), base: env.base, token: token}
}

func (c *oldForge) message(rpc string) *dynamicpb.Message {
	return dynamicpb.NewMessage(c.svc.Methods().ByName(protoreflect.Name(rpc)).Input())
}

func (c *oldForge) call(rpc string, in *dynamicpb.Message) (*dynamicpb.Message, error) {
	md := c.svc.Methods().ByName(protoreflect.Name(rpc))
	cl := connect.NewClient[dynamicpb.Message, dynamicpb.Message](c.http, c.base+"/forge.Forge/"+rpc,
		connect.WithGRPC(), connect.WithSchema(md),
		connect.WithResponseInitializer(func(spec connect.Spec, msg any) error {
			*(msg.(*dynamicpb.Message)) = *dynamicpb.NewMessage(spec.Schema.(protoreflect.MethodDescriptor).Output())
			return nil
		}))
	req := connect.NewRequest(in)
	req.Header().Set("Authorization", "Bearer "+c.token)
	res, err := cl.CallUnary(context.Background(), req)
	if err != nil {
		return nil, err
	}
	return res.Msg, nil
}

func field(m protoreflect.Message, name string) protoreflect.FieldDescriptor {
	return m.Descriptor().Fields().ByName(protoreflect.Name(name))
}

// reservationsOf is the stored record as REST shows it, and its password.
func (env *grpcEnv) stored(t *testing.T, mac string) (allocator.ExpectedMachine, string) {
	t.Helper()
	em := decodeEM(t, env.do("GET", "/api/v1/expected-machines/"+mac, env.viewer, "", nil))
	var row models.ExpectedMachine
	if err := env.db.First(&row, "id = ?", em.ID).Error; err != nil {
		t.Fatal(err)
	}
	return em, row.BmcPassword
}

func dpuText(em allocator.ExpectedMachine) string {
	var b strings.Builder
	for _, d := range em.ExpectedDPUs {
		s := func(p *string) string {
			if p == nil {
				return "-"
			}
			return *p
		}
		fmt.Fprintf(&b, "%s %s %s; ", d.SerialNumber, s(d.LoopbackIP), s(d.LoopbackIPv6))
	}
	return b.String()
}

// The older-client guarantee over gRPC: a client built from NICo's message
// without field 100 reads a record, changes sku_id and writes it back;
// every reservation and the BMC password survive, whether the client
// carries the unknown field 100 back (Go, C++, Java keep unknown fields) or
// drops it (Rust's prost). Setting one of NICo's host fields 9-17 is
// INVALID_ARGUMENT naming it and changes nothing; an Update with the
// wrapper present and empty (ipledger's own schema) clears the list.
func TestGRPCOlderClientKeepsReservations(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		env := newGRPCEnv(t, db)
		if r := env.do("PUT", "/api/v1/expected-machines", env.admin, emSample, nil); r.Code != 200 {
			t.Fatalf("replace-all: %d %s", r.Code, r.Body)
		}
		const mac = "0a:00:00:00:01:01"
		before, pwBefore := env.stored(t, mac)
		if len(before.ExpectedDPUs) != 2 || pwBefore != "factory-default-1" {
			t.Fatalf("sample record %+v", before)
		}
		old := env.oldClient(t, env.operator)
		for _, keepUnknown := range []bool{true, false} {
			req := old.message("GetExpectedMachine")
			req.Set(field(req, "bmc_mac_address"), protoreflect.ValueOfString(mac))
			got, err := old.call("GetExpectedMachine", req)
			if err != nil {
				t.Fatal(err)
			}
			if pw := got.Get(field(got, "bmc_password")).String(); pw != "" {
				t.Fatalf("Get returned the password %q", pw)
			}
			if got.Get(field(got, "chassis_serial_number")).String() != "CHS-000101" || len(got.GetUnknown()) == 0 {
				t.Fatalf("old client's Get: %v (unknown bytes %d, want field 100 there)", got, len(got.GetUnknown()))
			}
			if !keepUnknown {
				got.SetUnknown(nil)
			}
			sku := fmt.Sprintf("sku-keep-unknown-%v", keepUnknown)
			got.Set(field(got, "sku_id"), protoreflect.ValueOfString(sku))
			if _, err := old.call("UpdateExpectedMachine", got); err != nil {
				t.Fatalf("old client's Update (keep unknown %v): %v", keepUnknown, err)
			}
			after, pwAfter := env.stored(t, mac)
			if dpuText(after) != dpuText(before) || pwAfter != pwBefore || !after.BmcPasswordSet ||
				after.SkuID == nil || *after.SkuID != sku || after.Metadata.Name != "r01-u10" || len(after.Metadata.Labels) != 1 {
				t.Fatalf("after the old client's Update (keep unknown %v): %+v dpus %q password kept %v",
					keepUnknown, after, dpuText(after), pwAfter == pwBefore)
			}
		}

		// NICo's host fields 9-17, each set alone: refused, naming it.
		cur, _ := env.stored(t, mac)
		events := env.auditCount()
		for _, c := range []struct {
			name string
			set  func(m *dynamicpb.Message, fd protoreflect.FieldDescriptor)
		}{
			{"host_nics", func(m *dynamicpb.Message, fd protoreflect.FieldDescriptor) {
				nic := m.Mutable(fd).List().NewElement()
				nic.Message().Set(field(nic.Message(), "mac_address"), protoreflect.ValueOfString("0a:00:00:00:99:01"))
				m.Mutable(fd).List().Append(nic)
			}},
			{"rack_id", func(m *dynamicpb.Message, fd protoreflect.FieldDescriptor) {
				r := m.Mutable(fd).Message()
				r.Set(field(r, "id"), protoreflect.ValueOfString("rack-7"))
			}},
			{"default_pause_ingestion_and_poweron", setBool},
			{"dpf_enabled", setBool},
			{"is_dpf_enabled", func(m *dynamicpb.Message, fd protoreflect.FieldDescriptor) {
				m.Set(fd, protoreflect.ValueOfBool(false))
			}},
			{"bmc_ip_address", func(m *dynamicpb.Message, fd protoreflect.FieldDescriptor) {
				m.Set(fd, protoreflect.ValueOfString("10.0.0.9"))
			}},
			{"bmc_retain_credentials", setBool},
			{"dpu_mode", func(m *dynamicpb.Message, fd protoreflect.FieldDescriptor) { m.Set(fd, protoreflect.ValueOfEnum(2)) }},
			{"host_lifecycle_profile", func(m *dynamicpb.Message, fd protoreflect.FieldDescriptor) { m.Mutable(fd) }},
		} {
			for _, rpc := range []string{"UpdateExpectedMachine", "AddExpectedMachine"} {
				m := old.message(rpc)
				m.Set(field(m, "bmc_mac_address"), protoreflect.ValueOfString(mac))
				m.Set(field(m, "sku_id"), protoreflect.ValueOfString("sku-must-not-land"))
				c.set(m, field(m, c.name))
				_, err := old.call(rpc, m)
				wantCode(t, rpc+" with "+c.name, err, connect.CodeInvalidArgument, c.name+": set, but ipledger does not store NICo's host settings ("+c.name+")")
			}
		}
		// Two at once are both named.
		m := old.message("UpdateExpectedMachine")
		m.Set(field(m, "bmc_mac_address"), protoreflect.ValueOfString(mac))
		setBool(m, field(m, "bmc_retain_credentials"))
		m.Set(field(m, "bmc_ip_address"), protoreflect.ValueOfString("10.0.0.9"))
		_, err := old.call("UpdateExpectedMachine", m)
		wantCode(t, "two host fields", err, connect.CodeInvalidArgument, "bmc_ip_address: set, but ipledger does not store NICo's host settings (bmc_ip_address, bmc_retain_credentials)")
		if now, _ := env.stored(t, mac); now.Version != cur.Version || env.auditCount() != events {
			t.Fatalf("refused updates changed the record (version %d → %d) or wrote events", cur.Version, now.Version)
		}

		// ipledger's schema: the wrapper present and empty clears; absent keeps.
		c := env.client(env.operator)
		got, err := c.GetExpectedMachine(context.Background(), connect.NewRequest(&forge.ExpectedMachineRequest{Id: &common.UUID{Value: cur.ID}}))
		if err != nil || len(got.Msg.GetExpectedDpus().GetItems()) != 2 || got.Msg.GetId().GetValue() != cur.ID {
			t.Fatalf("Get by id: %v %v", got, err)
		}
		upd := got.Msg
		upd.ExpectedDpus = nil
		upd.BmcUsername = "root"
		if _, err := c.UpdateExpectedMachine(context.Background(), connect.NewRequest(upd)); err != nil {
			t.Fatal(err)
		}
		if now, pw := env.stored(t, mac); dpuText(now) != dpuText(before) || now.BmcUsername != "root" || pw != pwBefore {
			t.Fatalf("Update without the wrapper: %+v", now)
		}
		upd.ExpectedDpus = &forge.ExpectedDpuList{}
		if _, err := c.UpdateExpectedMachine(context.Background(), connect.NewRequest(upd)); err != nil {
			t.Fatal(err)
		}
		if now, pw := env.stored(t, mac); len(now.ExpectedDPUs) != 0 || pw != pwBefore {
			t.Fatalf("Update with an empty wrapper kept %q", dpuText(now))
		}
	})
}

func setBool(m *dynamicpb.Message, fd protoreflect.FieldDescriptor) {
	m.Set(fd, protoreflect.ValueOfBool(true))
}

func ptr(s string) *string { return &s }

// The REST validation cases over gRPC: each refused with the mapped code,
// the message starting with the gRPC field path, the REST code and field
// in the error metadata, and nothing written.
func TestGRPCValidationErrors(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		env := newGRPCEnv(t, db)
		ctx := context.Background()
		c := env.client(env.operator)
		if r := env.do("PUT", "/api/v1/expected-machines", env.admin, emSample, nil); r.Code != 200 {
			t.Fatalf("replace-all: %d %s", r.Code, r.Body)
		}
		dpus := func(ds ...*forge.ExpectedDpu) *forge.ExpectedDpuList { return &forge.ExpectedDpuList{Items: ds} }
		events := env.auditCount()
		for _, tc := range []struct {
			name  string
			em    *forge.ExpectedMachine
			code  connect.Code
			field string
			rest  string
		}{
			{"malformed MAC", &forge.ExpectedMachine{BmcMacAddress: "not-a-mac"}, connect.CodeInvalidArgument, "bmc_mac_address", "invalid"},
			{"IPv6 in loopback_ip", &forge.ExpectedMachine{BmcMacAddress: "0a:00:00:00:0d:01", ExpectedDpus: dpus(
				&forge.ExpectedDpu{SerialNumber: "MT-V1"}, &forge.ExpectedDpu{SerialNumber: "MT-V2", LoopbackIp: ptr("fd00:180:62:1::5")})},
				connect.CodeInvalidArgument, "expected_dpus.items[1].loopback_ip", "invalid"},
			{"value in an auto-assign range", &forge.ExpectedMachine{BmcMacAddress: "0a:00:00:00:0d:01", ExpectedDpus: dpus(
				&forge.ExpectedDpu{SerialNumber: "MT-V1", LoopbackIp: ptr("10.180.62.5")})},
				connect.CodeInvalidArgument, "expected_dpus.items[0].loopback_ip", "invalid"},
			{"value outside the pool", &forge.ExpectedMachine{BmcMacAddress: "0a:00:00:00:0d:01", ExpectedDpus: dpus(
				&forge.ExpectedDpu{SerialNumber: "MT-V1", LoopbackIpV6: ptr("fd00:99::1")})},
				connect.CodeInvalidArgument, "expected_dpus.items[0].loopback_ip_v6", "invalid"},
			{"duplicate serial in the request", &forge.ExpectedMachine{BmcMacAddress: "0a:00:00:00:0d:01", ExpectedDpus: dpus(
				&forge.ExpectedDpu{SerialNumber: "MT-V1"}, &forge.ExpectedDpu{SerialNumber: "MT-V1"})},
				connect.CodeInvalidArgument, "expected_dpus.items[1].serial_number", "invalid"},
			{"value declared by another machine", &forge.ExpectedMachine{BmcMacAddress: "0a:00:00:00:0d:01", ExpectedDpus: dpus(
				&forge.ExpectedDpu{SerialNumber: "MT-V1", LoopbackIp: ptr("10.180.62.210")})},
				connect.CodeFailedPrecondition, "expected_dpus.items[0].loopback_ip", "not_available"},
			{"serial declared by another machine", &forge.ExpectedMachine{BmcMacAddress: "0a:00:00:00:0d:01", ExpectedDpus: dpus(
				&forge.ExpectedDpu{SerialNumber: "MT2301X00011"})},
				connect.CodeAlreadyExists, "expected_dpus.items[0].serial_number", "conflict"},
			{"BMC MAC already used", &forge.ExpectedMachine{BmcMacAddress: "0A-00-00-00-01-02"}, connect.CodeAlreadyExists, "bmc_mac_address", "conflict"},
			{"NUL in a string", &forge.ExpectedMachine{BmcMacAddress: "0a:00:00:00:0d:01", Metadata: &forge.Metadata{Labels: []*forge.Label{{Key: "a\x00b"}}}},
				connect.CodeInvalidArgument, "metadata.labels[0].key", "invalid"},
			{"NUL in a serial", &forge.ExpectedMachine{BmcMacAddress: "0a:00:00:00:0d:01", FallbackDpuSerialNumbers: []string{"MT\x00"}},
				connect.CodeInvalidArgument, "fallback_dpu_serial_numbers", "invalid"},
		} {
			_, err := c.AddExpectedMachine(ctx, connect.NewRequest(tc.em))
			wantCode(t, tc.name, err, tc.code, tc.field+": ")
			var ce *connect.Error
			errors.As(err, &ce)
			if ce.Meta().Get(handlers.GRPCErrorCodeKey) != tc.rest || ce.Meta().Get(handlers.GRPCErrorFieldKey) != tc.field {
				t.Errorf("%s: error metadata %v", tc.name, ce.Meta())
			}
			if strings.Contains(ce.Message(), "expected_dpus[") {
				t.Errorf("%s: message uses the REST path: %s", tc.name, ce.Message())
			}
		}
		_, err := c.GetExpectedMachine(ctx, connect.NewRequest(&forge.ExpectedMachineRequest{BmcMacAddress: "0a:00:00:00:0d:09"}))
		wantCode(t, "unknown record", err, connect.CodeNotFound, "")
		_, err = c.GetExpectedMachine(ctx, connect.NewRequest(&forge.ExpectedMachineRequest{}))
		wantCode(t, "no selector", err, connect.CodeInvalidArgument, "bmc_mac_address: ")
		// Replace-all names the record, and is atomic.
		_, err = c.ReplaceAllExpectedMachines(ctx, connect.NewRequest(&forge.ExpectedMachineList{ExpectedMachines: []*forge.ExpectedMachine{
			{BmcMacAddress: "0a:00:00:00:0d:02"},
			{BmcMacAddress: "0a:00:00:00:0d:03", ExpectedDpus: dpus(&forge.ExpectedDpu{SerialNumber: "MT-R1"}, &forge.ExpectedDpu{SerialNumber: "MT-R2", LoopbackIp: ptr("10.999.0.1")})},
		}}))
		wantCode(t, "replace-all", err, connect.CodeInvalidArgument, "expected_machines[1].expected_dpus.items[1].loopback_ip: ")
		// A field from a newer schema is refused, not dropped.
		raw, _ := proto.Marshal(&forge.ExpectedMachine{BmcMacAddress: "0a:00:00:00:0d:04"})
		withUnknown := &forge.ExpectedMachine{}
		_ = proto.Unmarshal(append(raw, 0x90, 0x01, 0x01), withUnknown) // field 18, varint 1
		_, err = c.AddExpectedMachine(ctx, connect.NewRequest(withUnknown))
		wantCode(t, "unknown field", err, connect.CodeInvalidArgument, "the message has field number 18")
		if n := env.auditCount(); n != events {
			t.Fatalf("refused calls wrote %d audit events", n-events)
		}
		if r := env.do("GET", "/api/v1/expected-machines", env.viewer, "", nil); !strings.Contains(r.Body.String(), `"0a:00:00:00:01:02"`) || strings.Contains(r.Body.String(), "0a:00:00:00:0d:") {
			t.Fatalf("list after refused calls: %s", r.Body)
		}
		// GetAll reads what REST lists; DeleteAll (admin) empties it.
		all, err := env.client(env.viewer).GetAllExpectedMachines(ctx, connect.NewRequest(&emptypb.Empty{}))
		if err != nil || len(all.Msg.ExpectedMachines) != 2 || all.Msg.ExpectedMachines[0].GetMetadata().GetName() != "r01-u10" ||
			len(all.Msg.ExpectedMachines[1].GetExpectedDpus().GetItems()) != 0 || all.Msg.ExpectedMachines[1].ExpectedDpus == nil {
			t.Fatalf("GetAll: %v %v", all, err)
		}
		if _, err := env.client(env.admin).DeleteAllExpectedMachines(ctx, connect.NewRequest(&emptypb.Empty{})); err != nil {
			t.Fatal(err)
		}
		if all, err := c.GetAllExpectedMachines(ctx, connect.NewRequest(&emptypb.Empty{})); err != nil || len(all.Msg.ExpectedMachines) != 0 {
			t.Fatalf("GetAll after DeleteAll: %v %v", all, err)
		}
	})
}

// One DPU serial declared at the same moment by two gRPC clients (two
// connections), and one loopback by ten: exactly one wins each race, the
// others get the mapped code naming the field.
func TestGRPCConcurrentAdds(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		env := newGRPCEnv(t, db)
		race := func(n int, em func(i int) *forge.ExpectedMachine) []error {
			errs := make([]error, n)
			clients := make([]forgeconnect.ForgeClient, n)
			for i := range clients {
				clients[i] = env.client(env.operator)
			}
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := 0; i < n; i++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					<-start
					_, errs[i] = clients[i].AddExpectedMachine(context.Background(), connect.NewRequest(em(i)))
				}(i)
			}
			close(start)
			wg.Wait()
			return errs
		}
		check := func(what string, errs []error, code connect.Code, prefix string) {
			won := 0
			for i, err := range errs {
				if err == nil {
					won++
					continue
				}
				wantCode(t, fmt.Sprintf("%s, client %d", what, i), err, code, prefix)
			}
			if won != 1 {
				t.Fatalf("%s: %d clients won, want exactly 1", what, won)
			}
		}
		errs := race(2, func(i int) *forge.ExpectedMachine {
			return &forge.ExpectedMachine{BmcMacAddress: fmt.Sprintf("0a:00:00:00:0e:0%d", i),
				ExpectedDpus: &forge.ExpectedDpuList{Items: []*forge.ExpectedDpu{{SerialNumber: "MT-SAME-SERIAL"}}}}
		})
		check("one serial, two clients", errs, connect.CodeAlreadyExists, "expected_dpus.items[0].serial_number: ")
		errs = race(10, func(i int) *forge.ExpectedMachine {
			return &forge.ExpectedMachine{BmcMacAddress: fmt.Sprintf("0a:00:00:00:0f:0%d", i),
				ExpectedDpus: &forge.ExpectedDpuList{Items: []*forge.ExpectedDpu{{SerialNumber: fmt.Sprintf("MT-L%d", i), LoopbackIp: ptr("10.180.62.222")}}}}
		})
		check("one loopback, ten clients", errs, connect.CodeFailedPrecondition, "expected_dpus.items[0].loopback_ip: ")
	})
}

// Reflection lists the services (grpcurl needs nothing else), and health
// answers SERVING while the database does, without a token.
func TestGRPCReflectionAndHealth(t *testing.T) {
	t.Parallel()
	env := newGRPCEnv(t, dbtest.Open(t, models.SQLite))
	rc := grpcreflect.NewClient(h2c(), env.base)
	stream := rc.NewStream(context.Background())
	defer stream.Close()
	names, err := stream.ListServices()
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(names)
	if !strings.Contains(got, "forge.Forge") || !strings.Contains(got, "grpc.health.v1.Health") {
		t.Fatalf("reflection lists %s", got)
	}
	fd, err := stream.FileContainingSymbol("forge.ExpectedMachine")
	if err != nil || len(fd) == 0 {
		t.Fatalf("reflection file of forge.ExpectedMachine: %v", err)
	}
	req, _ := http.NewRequest("POST", env.base+"/grpc.health.v1.Health/Check", strings.NewReader(`{"service":"forge.Forge"}`))
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 || !strings.Contains(string(b), `SERVING"`) {
		t.Fatalf("health over HTTP/1.1 (Connect protocol): %d %s", res.StatusCode, b)
	}
}
