package content

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/cos-externalizer/cos-externalizer/internal/naming"
)

const (
	// DefaultBudget is the default data size of one Secret: the sum of len(key)+len(value) over its
	// data. It leaves room under the API server's 1 MiB Secret limit for metadata.
	DefaultBudget = 900 * 1024
	// MaxBudget is the API server's limit on the data of one Secret.
	MaxBudget = 1 << 20
	// DefaultCompressAbove is the default Options.CompressAbove.
	DefaultCompressAbove = 1024
)

// Options tunes PlanFor. The zero value is the measured default policy.
type Options struct {
	// Budget is the most data bytes one Secret may hold, summing len(key)+len(value) over its data.
	// 0 means DefaultBudget; more than MaxBudget is an error.
	Budget int

	// CompressAbove sets the compression policy. An object whose canonical JSON is at least
	// CompressAbove bytes is stored gzip-compressed when that saves at least an eighth of its size (a
	// guard for embedded data that does not compress); smaller objects are stored as plain JSON,
	// readable with base64 -d | jq. 0 means DefaultCompressAbove; a negative value compresses only what
	// the budget forces: whatever the policy, an object that would not fit the budget as plain JSON is
	// compressed.
	//
	// The default, 1 KiB, was chosen by measuring both real bundles (docs/benchmarks/2026-11-23-content.md).
	// Compressing only what the budget forces stores the prometheus-operator CRDs (10 objects of 8-693
	// KiB, 2,812,157 bytes) at 100% of their inline size in 4 Secrets, far over the 15% target;
	// compressing every object of 1 KiB or more stores them in 381,638 bytes (13.6%, one Secret), and
	// a lower threshold cannot do better there. On the Argo CD install (59 objects, 634,650 bytes) 1 KiB
	// gives 59,636 bytes (9.4%) against 50,337 (7.9%) when compressing all 59: the 45 objects under
	// 1 KiB would save about 200 bytes each, 9 KB in all, in the same single Secret; not worth giving
	// up plain, greppable JSON for the small RBAC, Service and ConfigMap objects people inspect most.
	CompressAbove int
}

func (o Options) budget() (int, error) {
	switch {
	case o.Budget == 0:
		return DefaultBudget, nil
	case o.Budget < 0 || o.Budget > MaxBudget:
		return 0, fmt.Errorf("content: budget %d out of range 1-%d", o.Budget, MaxBudget)
	}
	return o.Budget, nil
}

func (o Options) compressAbove() int {
	if o.CompressAbove == 0 {
		return DefaultCompressAbove
	}
	return o.CompressAbove
}

// Input is what PlanFor externalizes: the phases of a ClusterObjectSet, in order.
type Input struct {
	Phases []PhaseInput
}

// PhaseInput is one phase: its name (for errors) and its objects, in order.
type PhaseInput struct {
	Name    string
	Objects []ObjectInput
}

// ObjectInput is one phase member: exactly one of Object (an inline object to externalize, such as
// the map of an unstructured.Unstructured) or Keep (a ref already present, kept as given).
type ObjectInput struct {
	Object map[string]any
	Keep   *RefOut
}

// RefOut points at one stored object: a Secret (in the namespace of the caller's choosing) and a
// data key in it.
type RefOut struct {
	SecretName string
	Key        string
}

// SecretOut is one Secret to create: its name and data. Type, labels, namespace and immutability are
// the caller's business.
type SecretOut struct {
	Name string
	Data map[string][]byte
}

// Plan is the result of PlanFor.
type Plan struct {
	// Secrets are in creation order: the order the packing opened them.
	Secrets []SecretOut
	// Refs[i][j] is the ref replacing object j of phase i (a Keep ref as it was given).
	Refs [][]RefOut
	// Stats sums up the plan.
	Stats Stats
}

// Stats sums up a plan.
type Stats struct {
	// Objects is the number of inline objects externalized, duplicates included.
	Objects int
	// Entries is the number of distinct stored values (data entries over all Secrets).
	Entries int
	// Compressed is the number of entries stored gzip-compressed.
	Compressed int
	// Secrets is the number of Secrets.
	Secrets int
	// InlineBytes is the sum of the canonical JSON sizes of the inline objects, duplicates included.
	InlineBytes int64
	// StoredBytes is the sum of the sizes of the stored values (each entry once, keys not counted).
	StoredBytes int64
}

// TooLargeError says an object does not fit in one Secret even gzip-compressed. PhaseIndex and Index
// locate it as spec.phases[PhaseIndex].objects[Index].
type TooLargeError struct {
	Phase             string
	PhaseIndex, Index int
	Kind, Namespace   string
	Name              string
	// Size is the canonical JSON size, CompressedSize the gzip size, Budget the Secret budget; each
	// entry also needs KeyLength bytes for its key.
	Size, CompressedSize, Budget int
}

func (e *TooLargeError) Error() string {
	name := e.Name
	if e.Namespace != "" {
		name = e.Namespace + "/" + e.Name
	}
	return fmt.Sprintf("phase %q object %d (%s %s) is too large to store: %d bytes of JSON, %d gzip-compressed; "+
		"one Secret holds at most %d bytes of object, %d with its key", e.Phase, e.Index, e.Kind, name,
		e.Size, e.CompressedSize, e.Budget-KeyLength, e.Budget)
}

// ObjectError is any other failure to externalize one object, at spec.phases[PhaseIndex].objects[Index].
type ObjectError struct {
	Phase             string
	PhaseIndex, Index int
	Err               error
}

func (e *ObjectError) Error() string {
	return fmt.Sprintf("phase %q object %d: %v", e.Phase, e.Index, e.Err)
}

func (e *ObjectError) Unwrap() error { return e.Err }

// ErrNotExactlyOne is wrapped in an ObjectError when an ObjectInput has both or neither of Object and Keep.
var ErrNotExactlyOne = errors.New("exactly one of object or keep must be set")

// PlanFor externalizes every inline object of in for the ClusterObjectSet named cosName: it stores
// each object as its canonical JSON (gzip-compressed as Options says), keyed by Key, and packs the
// entries into Secrets in phase order, starting a new Secret when the next entry would pass the
// budget. Identical content is stored once and shared by every object that has it. Keep refs are
// copied to the plan unchanged. The same input always gives the same plan.
//
// An object that does not fit in a Secret even compressed is a *TooLargeError; other per-object
// failures are an *ObjectError. No error contains object content.
func PlanFor(cosName string, in Input, opts Options) (*Plan, error) {
	return PlanForContext(context.Background(), cosName, in, opts)
}

// PlanForContext is PlanFor, stopped when ctx ends: no object is encoded once it has, and the error
// wraps its cause (context.Cause), so no more CPU is spent on a plan no one waits for.
func PlanForContext(ctx context.Context, cosName string, in Input, opts Options) (*Plan, error) {
	if cosName == "" {
		return nil, errors.New("content: empty ClusterObjectSet name")
	}
	budget, err := opts.budget()
	if err != nil {
		return nil, err
	}
	p := &packer{budget: budget, compressAbove: opts.compressAbove(), placed: map[string]int{}}
	encoded := p.encodeAll(ctx, in)
	if ctx.Err() != nil {
		return nil, fmt.Errorf("content: planning stopped: %w", context.Cause(ctx))
	}
	refs := make([][]RefOut, len(in.Phases))
	bins := make([][]int, len(in.Phases)) // Secret index of each externalized object
	for i, ph := range in.Phases {
		refs[i] = make([]RefOut, len(ph.Objects))
		bins[i] = make([]int, len(ph.Objects))
		for j, o := range ph.Objects {
			ref, bin, err := p.member(o, encoded[i][j])
			if err != nil {
				return nil, located(err, ph.Name, i, j)
			}
			refs[i][j], bins[i][j] = ref, bin
		}
	}
	secrets := p.secrets(cosName)
	for i := range refs {
		for j, bin := range bins[i] {
			if bin >= 0 {
				refs[i][j].SecretName = secrets[bin].Name
			}
		}
	}
	p.stats.Secrets = len(secrets)
	return &Plan{Secrets: secrets, Refs: refs, Stats: p.stats}, nil
}

// located adds the position of the object to an error.
func located(err error, phase string, i, j int) error {
	var tooLarge *TooLargeError
	if errors.As(err, &tooLarge) {
		tooLarge.Phase, tooLarge.PhaseIndex, tooLarge.Index = phase, i, j
		return tooLarge
	}
	return &ObjectError{Phase: phase, PhaseIndex: i, Index: j, Err: err}
}

// packer fills Secrets with entries in order.
type packer struct {
	budget, compressAbove int
	bins                  []bin
	placed                map[string]int // key -> index of the bin holding it
	stats                 Stats
}

// bin is one Secret being filled.
type bin struct {
	data map[string][]byte
	size int
}

// member handles one phase member: it returns the ref and the bin (-1 for a Keep ref, whose ref is
// complete) of the object. A TooLargeError comes back without its position.
func (p *packer) member(o ObjectInput, enc encoded) (RefOut, int, error) {
	switch {
	case (o.Object == nil) == (o.Keep == nil):
		return RefOut{}, 0, ErrNotExactlyOne
	case o.Keep != nil:
		return *o.Keep, -1, nil
	}
	if enc.err != nil {
		return RefOut{}, 0, enc.err
	}
	return RefOut{Key: enc.entry.key}, p.place(enc.entry), nil
}

// encoded is the stored form of one inline object, or why it has none.
type encoded struct {
	entry entry
	err   error
}

// encodeAll encodes every inline object of in, spread over the available cores: encoding (canonical
// JSON and gzip) is most of the work, and each object is independent. Placing the entries into
// Secrets stays sequential, in phase order, so the plan does not depend on scheduling. Once ctx has
// ended no object is encoded (the caller checks ctx).
func (p *packer) encodeAll(ctx context.Context, in Input) [][]encoded {
	out := make([][]encoded, len(in.Phases))
	type job struct{ i, j int }
	jobs := make(chan job)
	var wg sync.WaitGroup
	for range max(runtime.GOMAXPROCS(0), 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for jb := range jobs {
				if ctx.Err() != nil {
					continue
				}
				e, err := p.encode(in.Phases[jb.i].Objects[jb.j].Object)
				out[jb.i][jb.j] = encoded{entry: e, err: err}
			}
		}()
	}
	for i, ph := range in.Phases {
		out[i] = make([]encoded, len(ph.Objects))
		for j, o := range ph.Objects {
			if o.Object != nil && o.Keep == nil && ctx.Err() == nil {
				jobs <- job{i, j}
			}
		}
	}
	close(jobs)
	wg.Wait()
	return out
}

// entry is an object as it is stored.
type entry struct {
	key        string
	stored     []byte
	size       int // canonical JSON size
	compressed bool
}

// encode turns an object into its stored form under the compression policy.
func (p *packer) encode(obj map[string]any) (entry, error) {
	buf := plainBuffers.Get().(*[]byte)
	defer plainBuffers.Put(buf)
	c, err := appendCanonical((*buf)[:0], obj)
	if err != nil {
		return entry{}, err
	}
	*buf = c[:0] // c is only borrowed: the plan keeps a copy or the compressed bytes
	e := entry{size: len(c)}
	forced := KeyLength+len(c) > p.budget
	if forced || (p.compressAbove >= 0 && len(c) >= p.compressAbove) {
		zbuf := compressedBuffers.Get().(*[]byte)
		defer compressedBuffers.Put(zbuf)
		z := appendGzip((*zbuf)[:0], c)
		*zbuf = z[:0] // z is only borrowed too
		if forced && KeyLength+len(z) > p.budget {
			return entry{}, tooLarge(obj, len(c), len(z), p.budget)
		}
		if forced || pays(len(c), len(z)) {
			e.stored, e.compressed = bytes.Clone(z), true
		}
	}
	if !e.compressed {
		e.stored = bytes.Clone(c)
	}
	e.key = Key(e.stored)
	return e, nil
}

// pays reports whether compressing plain bytes to compressed bytes saves at least an eighth.
func pays(plain, compressed int) bool { return compressed <= plain-plain/8 }

// tooLarge describes an object that cannot be stored, without its content.
func tooLarge(obj map[string]any, size, compressed, budget int) *TooLargeError {
	e := &TooLargeError{Size: size, CompressedSize: compressed, Budget: budget}
	e.Kind, _ = obj["kind"].(string)
	if md, ok := obj["metadata"].(map[string]any); ok {
		e.Name, _ = md["name"].(string)
		e.Namespace, _ = md["namespace"].(string)
	}
	return e
}

// place puts an entry into the current bin, or a new one when it would pass the budget, and returns
// the index of the bin that holds its key. An entry already placed is not stored again.
func (p *packer) place(e entry) int {
	p.stats.Objects++
	p.stats.InlineBytes += int64(e.size)
	if b, ok := p.placed[e.key]; ok {
		return b
	}
	n := len(e.key) + len(e.stored)
	if len(p.bins) == 0 || p.bins[len(p.bins)-1].size+n > p.budget {
		p.bins = append(p.bins, bin{data: map[string][]byte{}})
	}
	b := len(p.bins) - 1
	p.bins[b].data[e.key] = e.stored
	p.bins[b].size += n
	p.placed[e.key] = b
	p.stats.Entries++
	p.stats.StoredBytes += int64(len(e.stored))
	if e.compressed {
		p.stats.Compressed++
	}
	return b
}

// secrets names the filled bins.
func (p *packer) secrets(cosName string) []SecretOut {
	out := make([]SecretOut, len(p.bins))
	for i, b := range p.bins {
		out[i] = SecretOut{Name: naming.SecretName(cosName, b.data), Data: b.data}
	}
	return out
}
