package console

import (
	"testing"

	"github.com/ipledger/ipledger/allocator"
)

// The console's search finds an ExpectedMachine's name whichever Unicode
// form it was stored in and whichever form the text is typed in: a name
// written decomposed ("e" and a combining acute, as some tools write it)
// is found by the composed "é" a keyboard types, and the other way round,
// whole (one exact hit, which the console opens) and in part (the list
// page's search and ListExpectedMachines' q).
func TestSearchFindsNamesInEitherUnicodeForm(t *testing.T) {
	t.Parallel()
	const (
		nfc = "caf\u00e9-r\u00f6ck-01" // café-röck-01, composed
		nfd = "cafe\u0301-ro\u0308ck-01"
	)
	for _, c := range []struct{ stored, typed string }{{nfd, nfc}, {nfc, nfd}} {
		siteEach(t, siteOpts{}, func(t *testing.T, s *site) {
			em, err := s.a.CreateExpectedMachine(s.ctx, allocator.ExpectedMachineSpec{BmcMacAddress: "0a:00:00:00:0e:01",
				Metadata: &allocator.Metadata{Name: c.stored}})
			if err != nil {
				t.Fatal(err)
			}
			if em.Metadata.Name != c.stored {
				t.Fatalf("the name is stored as %q, want it as written, %q", em.Metadata.Name, c.stored)
			}
			r, err := s.c.Search(s.ctx, c.typed)
			if err != nil {
				t.Fatal(err)
			}
			if h := r.Redirect(); h == nil || h.Kind != HitExpectedMachine || h.ID != em.ID {
				t.Errorf("search %q for the name stored as %q: hits %+v, want the one ExpectedMachine", c.typed, c.stored, r.Hits)
			}
			for _, part := range []string{c.typed[:6], c.typed[3:], "R\u00d6CK", "RO\u0308CK"} {
				r, err := s.c.Search(s.ctx, part)
				if err != nil {
					t.Fatal(err)
				}
				if len(r.Hits) != 1 || r.Hits[0].ID != em.ID || r.Hits[0].Detail != "name "+c.stored+", not ingested yet" {
					t.Errorf("search %q for the name stored as %q: hits %+v, want the ExpectedMachine by its name", part, c.stored, r.Hits)
				}
				page, err := s.a.ListExpectedMachines(s.ctx, allocator.ExpectedMachineFilter{Search: part})
				if err != nil {
					t.Fatal(err)
				}
				if len(page.Items) != 1 || page.Items[0].ID != em.ID {
					t.Errorf("ExpectedMachines q=%q for the name stored as %q: %d items, want it", part, c.stored, len(page.Items))
				}
			}
		})
	}
}
