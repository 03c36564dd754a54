package allocator

import "fmt"

// Path names a way an automatic allocation is written. Options.ForcePath
// makes every automatic allocation take one, so that tests and benchmarks
// can hold each path to the general one; a server leaves it empty and the
// allocator chooses.
type Path string

const (
	// PathAuto is the allocator's own choice: the group commit, on
	// PostgreSQL its pipelines and guesses.
	PathAuto Path = ""
	// PathSingle writes each allocation in a transaction of its own on
	// the general path (allocate.go), without queueing.
	PathSingle Path = "single"
	// PathGroupGeneral group-commits concurrent allocations on the general
	// path (one gorm transaction, allocateLowestFree).
	PathGroupGeneral Path = "group-general"
	// PathGroupPipelines group-commits on PostgreSQL with the two pgx
	// pipelines and never guesses (groupcommit_pg.go).
	PathGroupPipelines Path = "group-pipelines"
	// PathGroupGuessed is PostgreSQL's usual path: the guessed
	// one-round-trip INSERT once a guess is known (groupcommit_guess.go).
	PathGroupGuessed Path = "group-guessed"
	// PathGroupShared is PathGroupGuessed with the statement of a shared
	// transaction even for one pool (groupcommit_shared.go).
	PathGroupShared Path = "group-shared"
)

// Paths are every Path a test can force, PathSingle (the reference) first.
var Paths = []Path{PathSingle, PathGroupGeneral, PathGroupPipelines, PathGroupGuessed, PathGroupShared}

func (p Path) valid() error {
	if p == PathAuto {
		return nil
	}
	for _, q := range Paths {
		if p == q {
			return nil
		}
	}
	return fmt.Errorf("allocator: unknown ForcePath %q", string(p))
}

// pgPipelines says the group commit may use the PostgreSQL pipelines.
func (p Path) pgPipelines() bool { return p != PathGroupGeneral && p != PathSingle }

// guesses says the group commit may commit on a guess.
func (p Path) guesses() bool { return p.pgPipelines() && p != PathGroupPipelines }
