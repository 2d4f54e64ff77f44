// Package splice builds a DS4 GGUF whose routed experts in chosen layers
// come from a donor file and everything else from a base file, copying
// tensor bytes without requantizing (docs/formats/harness.md#splicing-layers): for example a
// q2 model with q4 experts in its last layers.
package splice

import (
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/ds4-go/ds4/gguf"
	"github.com/ds4-go/ds4/quant"
)

// ParseLayers parses a layer list: comma-separated layer ids and
// inclusive ranges ("37-42", "0-2,40-42"). It returns the layers sorted,
// each once; an empty list or item, a descending range or a negative id
// is an error.
func ParseLayers(spec string) ([]int, error) {
	if strings.TrimSpace(spec) == "" {
		return nil, errors.New("splice: empty layer list")
	}
	var layers []int
	for item := range strings.SplitSeq(spec, ",") {
		item = strings.TrimSpace(item)
		lo, hi, isRange := strings.Cut(item, "-")
		a, err := layerID(lo)
		if err != nil {
			return nil, fmt.Errorf("splice: layer list %q: item %q: %w", spec, item, err)
		}
		b := a
		if isRange {
			if b, err = layerID(hi); err != nil {
				return nil, fmt.Errorf("splice: layer list %q: item %q: %w", spec, item, err)
			}
			if b < a {
				return nil, fmt.Errorf("splice: layer list %q: range %q is descending", spec, item)
			}
		}
		for l := a; l <= b; l++ {
			layers = append(layers, l)
		}
	}
	slices.Sort(layers)
	return slices.Compact(layers), nil
}

// layerID parses one layer id.
func layerID(s string) (int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, errors.New("empty layer id")
	}
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil {
		return 0, fmt.Errorf("layer id %q is not a number in 0..65535", s)
	}
	return int(n), nil
}

// expertName matches the routed expert stacks and captures their layer.
var expertName = regexp.MustCompile(`^blk\.(\d+)\.ffn_(gate|up|down)_exps\.weight$`)

// expertLayer returns the layer of a routed expert stack, or -1.
func expertLayer(name string) int {
	m := expertName.FindStringSubmatch(name)
	if m == nil {
		return -1
	}
	l, err := strconv.Atoi(m[1])
	if err != nil {
		return -1
	}
	return l
}

// Tensor is one tensor of the spliced file.
type Tensor struct {
	gguf.TensorInfo      // as written: type, dims, offset in the new file, size
	Donor           bool // taken from the donor rather than the base
}

// Plan is a spliced file: the base's metadata and tensor order, the
// selected layers' routed experts from the donor.
type Plan struct {
	Layers     []int
	Tensors    []Tensor
	DonorTypes map[quant.Type]int // donor tensors per type
	Donors     int                // tensors taken from the donor
	BaseBytes  int64              // the base's tensor data, padded
	MixedBytes int64              // the spliced file's tensor data, padded
	DataOffset int64              // where the tensor data starts in the spliced file

	base, donor *gguf.File
}

// NewPlan checks that base and donor are compatible (same version,
// tensor count and alignment; every base tensor in the donor with the
// same dims) and plans the file taking the routed experts of layers from
// the donor. Every selected layer must have routed experts in the base.
func NewPlan(base, donor *gguf.File, layers []int) (*Plan, error) {
	switch {
	case base.Version != donor.Version:
		return nil, fmt.Errorf("splice: base is GGUF version %d, donor %d", base.Version, donor.Version)
	case len(base.Tensors) != len(donor.Tensors):
		return nil, fmt.Errorf("splice: base has %d tensors, donor %d", len(base.Tensors), len(donor.Tensors))
	case base.Alignment != donor.Alignment:
		return nil, fmt.Errorf("splice: base alignment is %d, donor %d", base.Alignment, donor.Alignment)
	}
	selected := make(map[int]bool, len(layers))
	for _, l := range layers {
		selected[l] = true
	}
	found := make(map[int]bool, len(layers))
	p := &Plan{Layers: slices.Clone(layers), DonorTypes: map[quant.Type]int{}, base: base, donor: donor}
	var errs []error
	infos := make([]gguf.TensorInfo, 0, len(base.Tensors))
	for _, bt := range base.Tensors {
		dt, ok := donor.Tensor(bt.Name)
		if !ok {
			errs = append(errs, fmt.Errorf("tensor %s: not in the donor", bt.Name))
			continue
		}
		if !slices.Equal(bt.Dims, dt.Dims) {
			errs = append(errs, fmt.Errorf("tensor %s: dims %v in the base, %v in the donor", bt.Name, bt.Dims, dt.Dims))
			continue
		}
		t := Tensor{TensorInfo: bt}
		if l := expertLayer(bt.Name); l >= 0 && selected[l] {
			found[l] = true
			t = Tensor{TensorInfo: dt, Donor: true}
			p.Donors++
			p.DonorTypes[dt.Type]++
		}
		p.BaseBytes += padded(bt.Size, base.Alignment)
		p.MixedBytes += padded(t.Size, base.Alignment)
		p.Tensors = append(p.Tensors, t)
		infos = append(infos, gguf.TensorInfo{Name: t.Name, Type: t.Type, Dims: t.Dims})
	}
	for _, l := range layers {
		if !found[l] {
			errs = append(errs, fmt.Errorf("layer %d: no routed expert tensors in the base", l))
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("splice: %w", errors.Join(errs...))
	}
	// The writer assigns the new offsets; measure them with a writer
	// that discards everything after the header.
	gw, err := gguf.NewWriter(io.Discard, base.KV, infos)
	if err != nil {
		return nil, fmt.Errorf("splice: %w", err)
	}
	for i, t := range gw.Tensors() {
		p.Tensors[i].Offset = t.Offset
	}
	// The header holds the base's metadata and the base's tensor names
	// and ranks, and every other field has a fixed width, so it is as long
	// as the base's.
	p.DataOffset = int64(base.DataOffset)
	return p, nil
}

func padded(n, align uint64) int64 { return int64((n + align - 1) / align * align) }

// copyBuffer is how many bytes Write copies per step (and per progress
// report).
const copyBuffer = 64 << 20

// Write streams the spliced file to w: the base's header and metadata,
// the new tensor infos, then every tensor's bytes copied from its file.
// progress, if set, is called with the number of tensor bytes copied.
func (p *Plan) Write(w io.Writer, progress func(n int64)) error {
	infos := make([]gguf.TensorInfo, len(p.Tensors))
	for i, t := range p.Tensors {
		infos[i] = gguf.TensorInfo{Name: t.Name, Type: t.Type, Dims: t.Dims}
	}
	gw, err := gguf.NewWriter(w, p.base.KV, infos)
	if err != nil {
		return fmt.Errorf("splice: %w", err)
	}
	for _, t := range p.Tensors {
		from := p.base
		if t.Donor {
			from = p.donor
		}
		src, _ := from.Tensor(t.Name)
		data := from.TensorData(src)
		for len(data) > 0 {
			n := min(len(data), copyBuffer)
			if _, err := gw.Write(data[:n]); err != nil {
				return fmt.Errorf("splice: tensor %s: %w", t.Name, err)
			}
			if progress != nil {
				progress(int64(n))
			}
			data = data[n:]
		}
	}
	if err := gw.Close(); err != nil {
		return fmt.Errorf("splice: %w", err)
	}
	return nil
}

// WriteFile writes the spliced file to path through path+".tmp", synced
// and then renamed over path. It refuses an existing path unless force,
// and always refuses an existing path+".tmp" (another run's, or one left
// by a crash).
func (p *Plan) WriteFile(path string, force bool, progress func(n int64)) (err error) {
	if _, err := os.Stat(path); err == nil && !force {
		return fmt.Errorf("splice: %s exists (use --force to replace it)", path)
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("splice: %s exists: another splice is writing it, or one failed (remove it)", tmp)
		}
		return fmt.Errorf("splice: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err := p.Write(f, progress); err != nil {
		return fmt.Errorf("%w (writing %s)", err, tmp)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("splice: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("splice: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("splice: %w", err)
	}
	return nil
}

// TensorBytes returns the tensor bytes Write copies, the total its
// progress callback reaches.
func (p *Plan) TensorBytes() int64 {
	var total int64
	for _, t := range p.Tensors {
		total += int64(t.Size)
	}
	return total
}

// WriteSummary writes the plan: the layers, the donor tensors by type and
// the payload sizes.
func (p *Plan) WriteSummary(w io.Writer) {
	fmt.Fprintf(w, "layers from the donor: %v\n", p.Layers)
	types := make([]quant.Type, 0, len(p.DonorTypes))
	for t := range p.DonorTypes {
		types = append(types, t)
	}
	slices.Sort(types)
	fmt.Fprintf(w, "donor tensors: %d", p.Donors)
	for _, t := range types {
		fmt.Fprintf(w, ", %d %v", p.DonorTypes[t], t)
	}
	fmt.Fprintln(w)
	const gib = 1 << 30
	delta := p.MixedBytes - p.BaseBytes
	fmt.Fprintf(w, "base payload: %d bytes (%.3f GiB)\n", p.BaseBytes, float64(p.BaseBytes)/gib)
	fmt.Fprintf(w, "mixed payload: %d bytes (%.3f GiB)\n", p.MixedBytes, float64(p.MixedBytes)/gib)
	fmt.Fprintf(w, "delta: %+d bytes (%+.3f GiB)\n", delta, float64(delta)/gib)
	fmt.Fprintf(w, "file: %d bytes\n", p.DataOffset+p.MixedBytes)
}
