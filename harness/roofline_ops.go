package harness

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/ds4-go/ds4/backends"
	"github.com/ds4-go/ds4/engine"
)

// DecodeOp is the share of a decode step taken by one kind of matrix
// product, timed around each backend call: every layer's product of one
// tensor, or every layer's parallel batch that starts with it.
type DecodeOp struct {
	Op     string  `parquet:"op"`    // the tensor's name, its layer as N (blk.N.…); a batch adds " +k" for its other products
	Calls  float64 `parquet:"calls"` // calls per decode step
	Millis float64 `parquet:"ms"`    // milliseconds per decode step
	Bytes  int64   `parquet:"bytes"` // weight bytes read per decode step (one expert's for an expert product)
	GBs    float64 `parquet:"gb_s"`  // Bytes over Millis
}

// DecodeOpRecord is one row of a roofline run's decode breakdown.
type DecodeOpRecord struct {
	RunMeta
	DecodeOp
	StepMillis float64 `parquet:"step_ms"` // the whole decode step, matrix products and the rest
}

// RooflineOpsTable is the directory of roofline runs' decode breakdowns
// under a results root.
const RooflineOpsTable = "roofline_ops"

// MeasureDecodeOps prefills prefill tokens and decodes steps more (after a
// few untimed ones), timing each matrix product the session asks of be. It
// returns the products grouped by DecodeOp.Op, the most time first, and
// the mean time of a decode step, of which the rest went to norms,
// attention over the cache, routing and the like.
func MeasureDecodeOps(ctx context.Context, m *engine.Model, be backends.Backend, prefill, steps int) ([]DecodeOp, time.Duration, error) {
	if prefill <= 0 || steps <= 0 {
		return nil, 0, errors.New("harness: decode ops: prefill and decode token counts must be positive")
	}
	t := &opTimer{Backend: be, ops: map[string]*opTotal{}}
	s, toks, err := prefilledSession(m, t, prefill, speedWarmup+steps, "decode ops")
	if err != nil {
		return nil, 0, err
	}
	if err := decodeAll(ctx, s, toks[prefill:prefill+speedWarmup], nil, "decode ops"); err != nil {
		return nil, 0, err
	}
	t.on = true
	start := time.Now()
	if err := decodeAll(ctx, s, toks[prefill+speedWarmup:], nil, "decode ops"); err != nil {
		return nil, 0, err
	}
	step := time.Since(start) / time.Duration(steps)
	ops := make([]DecodeOp, 0, len(t.ops))
	for name, o := range t.ops {
		op := DecodeOp{
			Op:     name,
			Calls:  float64(o.calls) / float64(steps),
			Millis: o.d.Seconds() * 1e3 / float64(steps),
			Bytes:  o.bytes / int64(steps),
		}
		if op.Millis > 0 {
			op.GBs = float64(op.Bytes) / op.Millis / 1e6
		}
		ops = append(ops, op)
	}
	slices.SortFunc(ops, func(a, b DecodeOp) int {
		if c := cmp.Compare(b.Millis, a.Millis); c != 0 {
			return c
		}
		return cmp.Compare(a.Op, b.Op)
	})
	return ops, step, nil
}

// opTimer is a backend that times its matrix products by opName while on.
type opTimer struct {
	backends.Backend
	on  bool
	ops map[string]*opTotal
}

// opTotal is the calls, time and weight bytes of one DecodeOp.
type opTotal struct {
	calls int
	d     time.Duration
	bytes int64
}

// layerPrefix matches the layer part of a tensor name.
var layerPrefix = regexp.MustCompile(`^blk\.\d+\.`)

// opName is the DecodeOp.Op of the products of ps.
func opName(ps []backends.Product) string {
	name := layerPrefix.ReplaceAllString(ps[0].W.Name, "blk.N.")
	if len(ps) > 1 {
		name += fmt.Sprintf(" +%d", len(ps)-1)
	}
	return name
}

// add records one call of the products of ps that took d.
func (t *opTimer) add(ps []backends.Product, d time.Duration) {
	name := opName(ps)
	o := t.ops[name]
	if o == nil {
		o = &opTotal{}
		t.ops[name] = o
	}
	o.calls++
	o.d += d
	for _, p := range ps {
		o.bytes += int64(p.W.Rows) * int64(p.W.RowBytes)
	}
}

// timed runs f, the products of ps, and records its time while t is on.
func (t *opTimer) timed(ps []backends.Product, f func()) {
	if !t.on || len(ps) == 0 {
		f()
		return
	}
	start := time.Now()
	f()
	t.add(ps, time.Since(start))
}

func (t *opTimer) MatVec(dst []float32, w backends.Matrix, x []float32) {
	t.timed([]backends.Product{{W: w}}, func() { t.Backend.MatVec(dst, w, x) })
}

func (t *opTimer) MatMul(dst []float32, w backends.Matrix, x []float32, n int) {
	t.timed([]backends.Product{{W: w}}, func() { t.Backend.MatMul(dst, w, x, n) })
}

func (t *opTimer) MatMulBatch(ps []backends.Product) {
	t.timed(ps, func() { t.Backend.MatMulBatch(ps) })
}
