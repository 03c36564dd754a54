package allocator

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/internal/testkit"
	"github.com/ipledger/ipledger/models"
)

// TestSerialDeclaredOnceInAnyCase: a DPU serial is one DPU in any case.
// A second declaration in another case is 409 conflict naming the stored
// spelling and its ExpectedMachine (create, replace, patch, merge
// import); two spellings in one request are 422 (one record, replace-all);
// a record may respell its own serial; and several writers declaring
// spellings of one serial at once leave exactly one declaration.
func TestSerialDeclaredOnceInAnyCase(t *testing.T) {
	t.Parallel()
	fndEach(t, func(t *testing.T, f *fnd) {
		emPools(f)
		a := f.emCreate(emSpec("0a:00:00:00:00:01", emDPU4("MT5002X00001", "", "")))
		b := f.emCreate(emSpec("0a:00:00:00:00:02"))
		const field = "expected_dpus[0].serial_number"
		msgs := []string{"mt5002x00001", "already declared as MT5002X00001", "host-0a:00:00:00:00:01"}
		_, err := f.a.CreateExpectedMachine(f.ctx, emSpec("0a:00:00:00:00:03", emDPU4("mt5002x00001", "", "")))
		testkit.WantCode(t, err, fault.CodeConflict, field, msgs...)
		_, err = f.a.ReplaceExpectedMachine(f.ctx, b.ID, emSpec("0a:00:00:00:00:02", emDPU4("Mt5002X00001", "", "")), nil)
		testkit.WantCode(t, err, fault.CodeConflict, field, "Mt5002X00001", "already declared as MT5002X00001")
		_, err = f.a.PatchExpectedMachine(f.ctx, b.ID, []byte(`{"expected_dpus":[{"serial_number":"mt5002x00001"}]}`), nil)
		testkit.WantCode(t, err, fault.CodeConflict, field, msgs...)
		res, err := f.a.ImportExpectedMachines(f.ctx, []ExpectedMachineSpec{emSpec("0a:00:00:00:00:02", emDPU4("mt5002x00001", "", ""))}, ImportMerge)
		testkit.WantCode(t, err, fault.CodeConflict, "expected_machines[0]."+field, msgs...)
		if res != nil && res.Created+res.Updated > 0 {
			t.Fatalf("a refused import wrote %+v", res)
		}
		_, err = f.a.CreateExpectedMachine(f.ctx, emSpec("0a:00:00:00:00:04", emDPU4("MT-X1", "", ""), emDPU4("mt-x1", "", "")))
		testkit.WantCode(t, err, fault.CodeInvalid, "expected_dpus[1].serial_number", "mt-x1")
		_, err = f.a.ReplaceAllExpectedMachines(f.ctx, []ExpectedMachineSpec{emSpec("0a:00:00:00:00:01", emDPU4("MT5002X00001", "", "")),
			emSpec("0a:00:00:00:00:02", emDPU4("mt5002x00001", "", ""))})
		testkit.WantCode(t, err, fault.CodeInvalid, "expected_machines[1]."+field, "mt5002x00001")
		if n := f.countRows(&models.ExpectedDPU{}, "1 = 1"); n != 1 {
			t.Fatalf("%d expected DPUs after the refusals, want 1", n)
		}
		// A record may change the case of its own serial.
		if _, err := f.a.PatchExpectedMachine(f.ctx, a.ID, []byte(`{"expected_dpus":[{"serial_number":"mt5002x00001"}]}`), nil); err != nil {
			t.Fatalf("respelling a record's own serial: %v", err)
		}

		// Writers racing to declare spellings of one serial: one wins.
		spellings := []string{"MT7000X00001", "mt7000x00001", "Mt7000X00001", "mT7000x00001", "MT7000x00001", "mt7000X00001"}
		errs := make([]error, len(spellings))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, s := range spellings {
			wg.Go(func() {
				<-start
				_, errs[i] = f.a.CreateExpectedMachine(f.ctx, emSpec(fmt.Sprintf("0a:00:00:00:70:%02x", i), emDPU4(s, "", "")))
			})
		}
		close(start)
		wg.Wait()
		ok := 0
		for i, err := range errs {
			if err == nil {
				ok++
			} else if !testkit.IsCode(err, fault.CodeConflict) || !strings.Contains(err.Error(), spellings[i]) {
				t.Errorf("%s: %v, want 409 conflict naming it", spellings[i], err)
			}
		}
		var n int64
		if err := f.db.Raw(`SELECT COUNT(*) FROM expected_dpus WHERE lower(serial_number) = 'mt7000x00001'`).Scan(&n).Error; err != nil {
			t.Fatal(err)
		}
		if ok != 1 || n != 1 {
			t.Fatalf("%d writers succeeded, %d declarations stored; want one of each", ok, n)
		}
	})
}
