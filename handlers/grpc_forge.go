package handlers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/audit"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/proto/gen/common"
	"github.com/ipledger/ipledger/proto/gen/forge"
	"github.com/ipledger/ipledger/proto/gen/forge/forgeconnect"
)

// Forge serves the ExpectedMachine RPCs of NICo's Forge gRPC service
// (docs/grpc.md). Like the REST handlers it only translates: each RPC
// converts the message, calls the allocator operation the matching REST
// route calls, and maps the allocator's error to a gRPC status.
// Authentication and roles are the server's (web), as for REST.
type Forge struct {
	A *allocator.Allocator
}

var _ forgeconnect.ForgeHandler = (*Forge)(nil)

func empty() *connect.Response[emptypb.Empty] { return connect.NewResponse(&emptypb.Empty{}) }

// AddExpectedMachine is REST POST /api/v1/expected-machines.
func (f *Forge) AddExpectedMachine(ctx context.Context, req *connect.Request[forge.ExpectedMachine]) (*connect.Response[emptypb.Empty], error) {
	spec, err := specFromProto(req.Msg, "")
	if err != nil {
		return nil, GRPCError(ctx, err)
	}
	if _, err := f.A.CreateExpectedMachine(ctx, spec); err != nil {
		return nil, GRPCError(ctx, err)
	}
	return empty(), nil
}

// UpdateExpectedMachine is REST PUT /api/v1/expected-machines/{id}: the
// record is selected by id when given, else by bmc_mac_address.
func (f *Forge) UpdateExpectedMachine(ctx context.Context, req *connect.Request[forge.ExpectedMachine]) (*connect.Response[emptypb.Empty], error) {
	sel, err := selector(req.Msg.GetBmcMacAddress(), req.Msg.GetId())
	if err != nil {
		return nil, GRPCError(ctx, err)
	}
	spec, err := specFromProto(req.Msg, "")
	if err != nil {
		return nil, GRPCError(ctx, err)
	}
	if _, err := f.A.ReplaceExpectedMachine(ctx, sel, spec, nil); err != nil {
		return nil, GRPCError(ctx, err)
	}
	return empty(), nil
}

// DeleteExpectedMachine is REST DELETE /api/v1/expected-machines/{id}.
func (f *Forge) DeleteExpectedMachine(ctx context.Context, req *connect.Request[forge.ExpectedMachineRequest]) (*connect.Response[emptypb.Empty], error) {
	sel, err := requestSelector(req.Msg)
	if err != nil {
		return nil, GRPCError(ctx, err)
	}
	if err := f.A.DeleteExpectedMachine(ctx, sel, nil); err != nil {
		return nil, GRPCError(ctx, err)
	}
	return empty(), nil
}

// GetExpectedMachine is REST GET /api/v1/expected-machines/{id}.
func (f *Forge) GetExpectedMachine(ctx context.Context, req *connect.Request[forge.ExpectedMachineRequest]) (*connect.Response[forge.ExpectedMachine], error) {
	sel, err := requestSelector(req.Msg)
	if err != nil {
		return nil, GRPCError(ctx, err)
	}
	em, err := f.A.GetExpectedMachine(ctx, sel)
	if err != nil {
		return nil, GRPCError(ctx, err)
	}
	return connect.NewResponse(ExpectedMachineProto(em)), nil
}

// GetAllExpectedMachines is REST GET /api/v1/expected-machines, every page.
func (f *Forge) GetAllExpectedMachines(ctx context.Context, _ *connect.Request[emptypb.Empty]) (*connect.Response[forge.ExpectedMachineList], error) {
	out := &forge.ExpectedMachineList{}
	cursor := ""
	for {
		page, err := f.A.ListExpectedMachines(ctx, allocator.ExpectedMachineFilter{Limit: 1000, Cursor: cursor})
		if err != nil {
			return nil, GRPCError(ctx, err)
		}
		for i := range page.Items {
			out.ExpectedMachines = append(out.ExpectedMachines, ExpectedMachineProto(&page.Items[i]))
		}
		if page.NextCursor == "" {
			return connect.NewResponse(out), nil
		}
		cursor = page.NextCursor
	}
}

// ReplaceAllExpectedMachines is REST PUT /api/v1/expected-machines:
// atomic, validated as a whole, errors naming expected_machines[i].
func (f *Forge) ReplaceAllExpectedMachines(ctx context.Context, req *connect.Request[forge.ExpectedMachineList]) (*connect.Response[emptypb.Empty], error) {
	if err := refuseUnknown(req.Msg.ProtoReflect(), ""); err != nil {
		return nil, GRPCError(ctx, err)
	}
	specs := make([]allocator.ExpectedMachineSpec, 0, len(req.Msg.GetExpectedMachines()))
	for i, m := range req.Msg.GetExpectedMachines() {
		spec, err := specFromProto(m, fmt.Sprintf("expected_machines[%d]", i))
		if err != nil {
			return nil, GRPCError(ctx, err)
		}
		specs = append(specs, spec)
	}
	if _, err := f.A.ReplaceAllExpectedMachines(ctx, specs); err != nil {
		return nil, GRPCError(ctx, err)
	}
	return empty(), nil
}

// DeleteAllExpectedMachines is REST DELETE /api/v1/expected-machines.
func (f *Forge) DeleteAllExpectedMachines(ctx context.Context, _ *connect.Request[emptypb.Empty]) (*connect.Response[emptypb.Empty], error) {
	if _, err := f.A.DeleteAllExpectedMachines(ctx); err != nil {
		return nil, GRPCError(ctx, err)
	}
	return empty(), nil
}

// selector is the {id} of the REST path: the id when the message has one,
// else the BMC MAC address.
func selector(mac string, id *common.UUID) (string, error) {
	if v := strings.TrimSpace(id.GetValue()); v != "" {
		return v, nil
	}
	if strings.TrimSpace(mac) == "" {
		return "", fault.Errf(fault.CodeInvalid, "bmc_mac_address", "bmc_mac_address or id is required to select an ExpectedMachine")
	}
	return mac, nil
}

func requestSelector(m *forge.ExpectedMachineRequest) (string, error) {
	if err := refuseUnknown(m.ProtoReflect(), ""); err != nil {
		return "", err
	}
	return selector(m.GetBmcMacAddress(), m.GetId())
}

// storedFields are the ExpectedMachine fields ipledger keeps. Every other
// field the message declares (NICo's host-side settings, 9 to 17) is
// refused when set: a client must not believe a setting was stored.
var storedFields = map[protoreflect.Name]bool{
	"bmc_mac_address": true, "bmc_username": true, "bmc_password": true,
	"chassis_serial_number": true, "fallback_dpu_serial_numbers": true,
	"metadata": true, "sku_id": true, "id": true, "expected_dpus": true,
}

// specFromProto is the request's ExpectedMachine as the allocator takes
// it. The wire's presence rules become the allocator's: an absent
// expected_dpus wrapper keeps the stored list (nil), a present one replaces
// it (even empty); an empty bmc_password keeps the stored password. The
// id is not part of the spec: Update selects by it, Add and ReplaceAll
// ignore it as REST does.
func specFromProto(m *forge.ExpectedMachine, prefix string) (allocator.ExpectedMachineSpec, error) {
	var s allocator.ExpectedMachineSpec
	r := m.ProtoReflect()
	var unstored []string
	fields := r.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if !storedFields[fd.Name()] && r.Has(fd) {
			unstored = append(unstored, joinPath(prefix, string(fd.Name())))
		}
	}
	if len(unstored) > 0 {
		return s, fault.Errf(fault.CodeInvalid, unstored[0],
			"set, but ipledger does not store NICo's host settings (%s); leave them unset; nothing was changed", strings.Join(unstored, ", "))
	}
	if err := refuseUnknown(r, prefix); err != nil {
		return s, err
	}
	s.BmcMacAddress = m.GetBmcMacAddress()
	s.BmcUsername = m.GetBmcUsername()
	if pw := m.GetBmcPassword(); pw != "" {
		s.BmcPassword = &pw
	}
	s.ChassisSerialNumber = m.GetChassisSerialNumber()
	s.FallbackDPUSerialNumbers = append([]string{}, m.GetFallbackDpuSerialNumbers()...)
	if md := m.GetMetadata(); md != nil {
		meta := allocator.Metadata{Name: md.GetName(), Description: md.GetDescription(), Labels: []allocator.Label{}}
		for _, l := range md.GetLabels() {
			meta.Labels = append(meta.Labels, allocator.Label{Key: l.GetKey(), Value: l.GetValue()})
		}
		s.Metadata = &meta
	}
	s.SkuID = m.SkuId
	if w := m.GetExpectedDpus(); w != nil {
		list := make([]allocator.ExpectedDPU, 0, len(w.GetItems()))
		for _, d := range w.GetItems() {
			list = append(list, allocator.ExpectedDPU{SerialNumber: d.GetSerialNumber(), LoopbackIP: d.LoopbackIp, LoopbackIPv6: d.LoopbackIpV6})
		}
		s.ExpectedDPUs = &list
	}
	return s, nil
}

// refuseUnknown refuses fields this server's schema does not know (sent by
// a client built from a newer schema) anywhere in the message — they would
// otherwise be dropped without a word — and strings with a NUL character.
func refuseUnknown(r protoreflect.Message, prefix string) error {
	if raw := r.GetUnknown(); len(raw) > 0 {
		num, _, n := protowire.ConsumeField(raw)
		if n < 0 {
			return fault.Errf(fault.CodeBadRequest, prefix, "the message is not valid protobuf")
		}
		where := "the message"
		if prefix != "" {
			where = prefix
		}
		return fault.Errf(fault.CodeInvalid, prefix, "%s has field number %d, which ipledger does not know; nothing was changed", where, num)
	}
	var err error
	r.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		name := joinPath(prefix, string(fd.Name()))
		if fd.Kind() == protoreflect.StringKind {
			// PostgreSQL cannot store a NUL (SQLite would): refused here
			// as REST refuses it in JSON, naming the field.
			vals := []string{}
			if fd.IsList() {
				for i := 0; i < v.List().Len(); i++ {
					vals = append(vals, v.List().Get(i).String())
				}
			} else {
				vals = append(vals, v.String())
			}
			for _, s := range vals {
				if strings.ContainsRune(s, 0) {
					err = fault.Errf(fault.CodeInvalid, name, "%s contains a NUL character", name)
					return false
				}
			}
			return true
		}
		if fd.Kind() != protoreflect.MessageKind {
			return true
		}
		if fd.IsList() {
			l := v.List()
			for i := 0; i < l.Len() && err == nil; i++ {
				err = refuseUnknown(l.Get(i).Message(), fmt.Sprintf("%s[%d]", name, i))
			}
		} else {
			err = refuseUnknown(v.Message(), name)
		}
		return err == nil
	})
	return err
}

func joinPath(prefix, f string) string {
	if prefix == "" {
		return f
	}
	return prefix + "." + f
}

// ExpectedMachineProto is an ExpectedMachine as GetExpectedMachine returns
// it: never the password; expected_dpus always present (possibly empty).
func ExpectedMachineProto(em *allocator.ExpectedMachine) *forge.ExpectedMachine {
	out := &forge.ExpectedMachine{
		BmcMacAddress:            em.BmcMacAddress,
		BmcUsername:              em.BmcUsername,
		ChassisSerialNumber:      em.ChassisSerialNumber,
		FallbackDpuSerialNumbers: em.FallbackDPUSerialNumbers,
		Metadata:                 &forge.Metadata{Name: em.Metadata.Name, Description: em.Metadata.Description},
		SkuId:                    em.SkuID,
		Id:                       &common.UUID{Value: em.ID},
		ExpectedDpus:             &forge.ExpectedDpuList{Items: make([]*forge.ExpectedDpu, 0, len(em.ExpectedDPUs))},
	}
	for _, l := range em.Metadata.Labels {
		lb := &forge.Label{Key: l.Key}
		if l.Value != "" {
			v := l.Value
			lb.Value = &v
		}
		out.Metadata.Labels = append(out.Metadata.Labels, lb)
	}
	for _, d := range em.ExpectedDPUs {
		out.ExpectedDpus.Items = append(out.ExpectedDpus.Items, &forge.ExpectedDpu{
			SerialNumber: d.SerialNumber, LoopbackIp: d.LoopbackIP, LoopbackIpV6: d.LoopbackIPv6})
	}
	return out
}

// grpcCodes maps the allocator's error codes to gRPC status codes
// (docs/grpc.md).
var grpcCodes = map[fault.Code]connect.Code{
	fault.CodeBadRequest:    connect.CodeInvalidArgument,
	fault.CodeInvalid:       connect.CodeInvalidArgument,
	fault.CodeNotFound:      connect.CodeNotFound,
	fault.CodeConflict:      connect.CodeAlreadyExists,
	fault.CodeNotAvailable:  connect.CodeFailedPrecondition,
	fault.CodePoolExhausted: connect.CodeFailedPrecondition,
	fault.CodeNotOwner:      connect.CodeFailedPrecondition,
	fault.CodeStaleVersion:  connect.CodeAborted,
	fault.CodeUnauthorized:  connect.CodeUnauthenticated,
	fault.CodeForbidden:     connect.CodePermissionDenied,
	fault.CodeUnavailable:   connect.CodeUnavailable,
}

// GRPCPath turns a REST field path into the gRPC message's path: the
// reservations sit inside the ExpectedDpuList wrapper, so
// expected_dpus[1].loopback_ip becomes expected_dpus.items[1].loopback_ip.
func GRPCPath(s string) string {
	return strings.ReplaceAll(s, "expected_dpus[", "expected_dpus.items[")
}

// Error metadata keys carrying the REST error code and field path, for
// clients that want more than the status code.
const (
	GRPCErrorCodeKey  = "ipledger-error-code"
	GRPCErrorFieldKey = "ipledger-error-field"
)

// GRPCError turns an allocator error into a gRPC status whose message
// starts with the field path ("expected_dpus.items[1].loopback_ip: …");
// the REST code and field also travel as error metadata. Anything that is
// not an allocator error is INTERNAL, its details only in the log.
func GRPCError(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce
	}
	e, _ := ToAPIError(err)
	code, ok := grpcCodes[e.Code]
	if !ok {
		code = connect.CodeInternal
		slog.ErrorContext(ctx, "internal error", "actor", audit.ActorFrom(ctx).Name,
			"request_id", audit.ActorFrom(ctx).RequestID, "error", err)
	}
	msg := GRPCPath(e.Message)
	if e.Field != "" {
		msg = GRPCPath(e.Field) + ": " + msg
	}
	out := connect.NewError(code, errors.New(msg))
	out.Meta().Set(GRPCErrorCodeKey, string(e.Code))
	if e.Field != "" {
		out.Meta().Set(GRPCErrorFieldKey, GRPCPath(e.Field))
	}
	return out
}
