package harness

import (
	"fmt"
	"io"
	"math"

	"github.com/ds4-go/ds4/backends"
	"github.com/ds4-go/ds4/convert/checkpoint"
	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/quant"
	"github.com/ds4-go/ds4/vectors"
)

// The quality study (issue 8, part 4): on the oracle cases, quantize with
// each recipe with and without an imatrix collected on the case's own
// lossless conversion, and measure how far the logits move from the
// reference implementation's (official and f32ref). The lossless
// conversion is measured too, as the floor.

// Imatrix labels of a study row.
const (
	StudyNoImatrix        = "none"
	StudyImatrixCollected = "collected"
)

// StudyOptions configure RunStudy.
type StudyOptions struct {
	// Recipes are the quantized conversions to study; nil means q2 and q4.
	Recipes []checkpoint.Mode
	// Prompts are the calibration token sequences (DeepSeek V4 ids); each
	// id is mapped into a case's vocabulary with MapVocab.
	Prompts [][]int
	// Heldout are further prompts (mapped the same way) on which every
	// conversion is compared with the lossless one; nil means none.
	Heldout [][]int
	Imatrix ImatrixOptions
	Workers int       // conversion goroutines; 0 means GOMAXPROCS
	Log     io.Writer // one line per conversion measured; nil means none
}

// StudyRow is one measurement of the study: a case converted with a
// recipe, with or without the imatrix, run on one engine path, against
// both references.
type StudyRow struct {
	Case      string `parquet:"case_id"`
	Recipe    string `parquet:"recipe"`  // lossless, q2, q4
	Imatrix   string `parquet:"imatrix"` // none or collected
	Path      string `parquet:"path"`    // prefill, decode, mixed
	Positions int64  `parquet:"positions"`

	F32RefMeanKL   float64 `parquet:"f32ref_mean_kl"`
	F32RefMedianKL float64 `parquet:"f32ref_median_kl"`
	F32RefP99KL    float64 `parquet:"f32ref_p99_kl"`
	F32RefMaxKL    float64 `parquet:"f32ref_max_kl"`
	F32RefTop1     float64 `parquet:"f32ref_same_top1"`
	F32RefNLLRatio float64 `parquet:"f32ref_nll_ratio"`

	OfficialMeanKL   float64 `parquet:"official_mean_kl"`
	OfficialMedianKL float64 `parquet:"official_median_kl"`
	OfficialP99KL    float64 `parquet:"official_p99_kl"`
	OfficialMaxKL    float64 `parquet:"official_max_kl"`
	OfficialTop1     float64 `parquet:"official_same_top1"`
	OfficialNLLRatio float64 `parquet:"official_nll_ratio"`

	// ImatrixTensors and ImatrixSlices count the tensors, and their
	// slices (one per expert), quantized with importance from the imatrix;
	// FallbackTensors those stored in a wider type than the recipe's
	// because their rows are not whole blocks (they ignore importance).
	ImatrixTensors  int64 `parquet:"imatrix_tensors"`
	ImatrixSlices   int64 `parquet:"imatrix_slices"`
	FallbackTensors int64 `parquet:"fallback_tensors"`
	// HeldoutPositions, HeldoutMeanKL and HeldoutTop1 compare the
	// conversion with the lossless one on the held-out prompts (repeated
	// on the rows of every path).
	HeldoutPositions int64   `parquet:"heldout_positions"`
	HeldoutMeanKL    float64 `parquet:"heldout_mean_kl"`
	HeldoutTop1      float64 `parquet:"heldout_same_top1"`

	// GateUpRelErr and DownRelErr measure the routed experts' weights
	// where the imatrix acts: Σ‖(W−Q)x‖² / Σ‖Wx‖² over the expert inputs
	// x the lossless model sees on the case's tokens (the FFN-normalized
	// row for gate and up, the route-weighted SwiGLU row for down), W the
	// lossless and Q the converted matrix, summed over layers and experts.
	GateUpRelErr float64 `parquet:"gate_up_rel_err"`
	DownRelErr   float64 `parquet:"down_rel_err"`
	// For rows with the imatrix, the per-position KL against f32ref
	// paired with the same recipe and path without it: the mean and
	// standard error of the difference (with − without; negative: the
	// imatrix helps) and the fraction of positions where it is lower.
	KLDeltaMean    float64 `parquet:"kl_delta_mean"`
	KLDeltaSE      float64 `parquet:"kl_delta_se"`
	KLImprovedFrac float64 `parquet:"kl_improved_frac"`
	// The same pairing on the held-out prompts.
	HeldoutKLDeltaMean  float64 `parquet:"heldout_kl_delta_mean"`
	HeldoutKLDeltaSE    float64 `parquet:"heldout_kl_delta_se"`
	HeldoutImprovedFrac float64 `parquet:"heldout_improved_frac"`
	// CalibPrompts, CalibTokens and CalibRoutes describe the collection
	// (0 for rows without the imatrix).
	CalibPrompts int64 `parquet:"calib_prompts"`
	CalibTokens  int64 `parquet:"calib_tokens"`
	CalibRoutes  int64 `parquet:"calib_routes"`
}

// MapVocab maps every id of prompts into [0, vocab) as id mod vocab, so
// calibration text tokenized with the DeepSeek V4 vocabulary can drive a
// model with a smaller one. The prompt structure (lengths, repeats, the
// special tokens' positions) survives; the ids' meaning does not, which
// on the oracle's random-weight models carries none anyway.
func MapVocab(prompts [][]int, vocab int) [][]int {
	out := make([][]int, len(prompts))
	for i, p := range prompts {
		q := make([]int, len(p))
		for j, id := range p {
			q[j] = ((id % vocab) + vocab) % vocab
		}
		out[i] = q
	}
	return out
}

// RunStudy runs the study on each oracle case directory: the lossless
// conversion, then every recipe without and with an imatrix collected
// from opt.Prompts on the lossless conversion, each on the prefill,
// decode and mixed paths, and on opt.Heldout against the lossless
// conversion.
func RunStudy(caseDirs []string, be backends.Backend, opt StudyOptions) ([]StudyRow, error) {
	if opt.Recipes == nil {
		opt.Recipes = []checkpoint.Mode{checkpoint.ModeQ2, checkpoint.ModeQ4}
	}
	if len(opt.Prompts) == 0 {
		return nil, fmt.Errorf("study: no calibration prompts")
	}
	if opt.Log == nil {
		opt.Log = io.Discard
	}
	var rows []StudyRow
	for _, dir := range caseDirs {
		c, err := vectors.LoadOracle(dir)
		if err != nil {
			return rows, fmt.Errorf("study: %w", err)
		}
		st, err := newCaseStudy(c, be, opt)
		if err != nil {
			return rows, err
		}
		if rows, err = st.run(rows, checkpoint.ModeLossless, nil); err != nil {
			return rows, err
		}
		iopt := opt.Imatrix
		if n := st.ref.Params.ContextLength; n > 0 && (iopt.Context <= 0 || iopt.Context > n) {
			iopt.Context = n
		}
		im, calib, err := CollectImatrix(st.ref, be, MapVocab(opt.Prompts, st.ref.Params.Vocab), iopt)
		if err != nil {
			return rows, fmt.Errorf("study: %s: %w", c.Name, err)
		}
		st.calib = calib
		fmt.Fprintf(opt.Log, "study: %s: imatrix from %d prompts, %d tokens, %d routed observations\n", c.Name, calib.Prompts, calib.Tokens, calib.Observations)
		for _, mode := range opt.Recipes {
			for _, m := range []*quant.Imatrix{nil, im} {
				if rows, err = st.run(rows, mode, m); err != nil {
					return rows, err
				}
			}
		}
	}
	return rows, nil
}

// caseStudy is the state of the study of one oracle case.
type caseStudy struct {
	c     *vectors.OracleCase
	be    backends.Backend
	opt   StudyOptions
	ref   *engine.Model // the lossless conversion
	acts  *expertActs   // its routed-expert rows on the case's tokens
	calib ImatrixStats
	// heldout holds the lossless conversion's logits of every held-out
	// prompt (mapped into the vocabulary).
	heldout       [][]int
	heldoutLogits [][]float32
	// without keeps the per-position KLs of each recipe without the
	// imatrix, by recipe and path ("heldout" for the held-out prompts).
	without map[string][]vectors.PositionStat
}

func newCaseStudy(c *vectors.OracleCase, be backends.Backend, opt StudyOptions) (*caseStudy, error) {
	st := &caseStudy{c: c, be: be, opt: opt, without: map[string][]vectors.PositionStat{}}
	var err error
	if st.ref, _, err = c.Convert(checkpoint.Options{Mode: checkpoint.ModeLossless, Workers: opt.Workers}); err != nil {
		return nil, fmt.Errorf("study: %w", err)
	}
	if st.acts, err = recordExpertActs(st.ref, be, c.Tokens); err != nil {
		return nil, fmt.Errorf("study: %s: %w", c.Name, err)
	}
	st.heldout = MapVocab(opt.Heldout, st.ref.Params.Vocab)
	for _, p := range st.heldout {
		l, err := allLogits(st.ref, be, p)
		if err != nil {
			return nil, fmt.Errorf("study: %s: held-out prompt: %w", c.Name, err)
		}
		st.heldoutLogits = append(st.heldoutLogits, l)
	}
	return st, nil
}

// allLogits prefills tokens on a fresh session of m and returns the
// logits of every position.
func allLogits(m *engine.Model, be backends.Backend, tokens []int) ([]float32, error) {
	s, err := engine.NewSession(m, be, engine.Options{Context: len(tokens)})
	if err != nil {
		return nil, err
	}
	all := make([]float32, len(tokens)*m.Params.Vocab)
	if err := s.PrefillAll(tokens, all); err != nil {
		return nil, err
	}
	return all, nil
}

// run measures one conversion of the case and appends its rows.
func (st *caseStudy) run(rows []StudyRow, mode checkpoint.Mode, im *quant.Imatrix) ([]StudyRow, error) {
	c := st.c
	fail := func(err error) ([]StudyRow, error) { return rows, fmt.Errorf("study: %s %s: %w", c.Name, mode, err) }
	res, err := vectors.RunOracleWith(c, checkpoint.Options{Mode: mode, Imatrix: im, Workers: st.opt.Workers}, st.be)
	if err != nil {
		return fail(err)
	}
	label := StudyNoImatrix
	if im != nil {
		label = StudyImatrixCollected
	}
	var tensors, nslices int64
	for _, t := range res.Conv.Tensors {
		if t.Imatrix > 0 {
			tensors++
			nslices += int64(t.Imatrix)
		}
	}
	gateUp, err := st.acts.relErr(st.ref, res.Model, "gate", "up")
	if err != nil {
		return fail(err)
	}
	down, err := st.acts.relErr(st.ref, res.Model, "down")
	if err != nil {
		return fail(err)
	}
	// Held-out prompts: the conversion against the lossless one.
	var held []vectors.PositionStat
	for i, p := range st.heldout {
		l, err := allLogits(res.Model, st.be, p)
		if err != nil {
			return fail(err)
		}
		_, ps, err := vectors.CompareTargets(st.heldoutLogits[i], l, st.ref.Params.Vocab, nil)
		if err != nil {
			return fail(err)
		}
		held = append(held, ps...)
	}
	hm := vectors.Summarize(held)
	for _, p := range res.Paths {
		a, b := p.VsF32Ref, p.VsOfficial
		r := StudyRow{Case: c.Name, Recipe: string(mode), Imatrix: label, Path: p.Path, Positions: int64(a.Positions),
			F32RefMeanKL: a.MeanKL, F32RefMedianKL: a.MedianKL, F32RefP99KL: a.P99KL, F32RefMaxKL: a.MaxKL, F32RefTop1: a.Top1, F32RefNLLRatio: a.NLLRatio,
			OfficialMeanKL: b.MeanKL, OfficialMedianKL: b.MedianKL, OfficialP99KL: b.P99KL, OfficialMaxKL: b.MaxKL, OfficialTop1: b.Top1, OfficialNLLRatio: b.NLLRatio,
			HeldoutPositions: int64(hm.Positions), HeldoutMeanKL: hm.MeanKL, HeldoutTop1: hm.Top1,
			ImatrixTensors: tensors, ImatrixSlices: nslices, FallbackTensors: int64(len(res.Conv.Fallbacks)),
			GateUpRelErr: gateUp, DownRelErr: down}
		key := string(mode) + "/" + p.Path
		if im == nil {
			st.without[key] = p.F32RefPositions
			st.without[string(mode)+"/heldout"] = held
		} else {
			r.CalibPrompts, r.CalibTokens, r.CalibRoutes = int64(st.calib.Prompts), int64(st.calib.Tokens), int64(st.calib.Observations)
			r.KLDeltaMean, r.KLDeltaSE, r.KLImprovedFrac = pairedKL(st.without[key], p.F32RefPositions)
			r.HeldoutKLDeltaMean, r.HeldoutKLDeltaSE, r.HeldoutImprovedFrac = pairedKL(st.without[string(mode)+"/heldout"], held)
		}
		rows = append(rows, r)
		if p.Path == "prefill" {
			fmt.Fprintf(st.opt.Log, "study: %s %s imatrix=%s: prefill mean KL %.4g vs f32ref, %.4g vs official, held-out %.4g; gate/up error %.4g (%d tensors with importance)\n",
				c.Name, mode, label, a.MeanKL, b.MeanKL, hm.MeanKL, gateUp, tensors)
		}
	}
	return rows, nil
}

// pairedKL compares two runs position by position: the mean and standard
// error of KL(with) − KL(without), and the fraction of positions where
// with is lower. It returns zeros when the runs do not pair up.
func pairedKL(without, with []vectors.PositionStat) (mean, se, improved float64) {
	n := len(with)
	if n == 0 || len(without) != n {
		return 0, 0, 0
	}
	var sum, sq float64
	better := 0
	for i := range with {
		d := with[i].KL - without[i].KL
		sum += d
		sq += d * d
		if d < 0 {
			better++
		}
	}
	mean = sum / float64(n)
	if n > 1 {
		se = math.Sqrt(max(sq/float64(n)-mean*mean, 0) * float64(n) / float64(n-1) / float64(n))
	}
	return mean, se, float64(better) / float64(n)
}

// expertActs holds the rows every routed expert evaluated on one
// sequence: per layer and expert, the FFN-normalized inputs (what gate
// and up multiply) and the route-weighted SwiGLU outputs (what down
// multiplies).
type expertActs struct {
	experts int
	in, mid map[[2]int][]float32 // concatenated rows
}

// ObserveExpert implements engine.ExpertObserver.
func (a *expertActs) ObserveExpert(il, e int, in, mid []float32) {
	k := [2]int{il, e}
	a.in[k] = append(a.in[k], in...)
	a.mid[k] = append(a.mid[k], mid...)
}

// recordExpertActs prefills tokens on m and records every routed-expert
// evaluation.
func recordExpertActs(m *engine.Model, be backends.Backend, tokens []int) (*expertActs, error) {
	a := &expertActs{experts: m.Params.Experts, in: map[[2]int][]float32{}, mid: map[[2]int][]float32{}}
	s, err := engine.NewSession(m, be, engine.Options{Context: len(tokens), Numerics: engine.NumericsOfficial, Experts: a})
	if err != nil {
		return nil, err
	}
	if err := s.Prefill(tokens); err != nil {
		return nil, err
	}
	return a, nil
}

// relErr returns Σ‖(W−Q)x‖² / Σ‖Wx‖² over the recorded rows x of every
// layer and expert, for the routed tensors blk.L.ffn_<part>_exps.weight of
// each part: W from ref, Q from q.
func (a *expertActs) relErr(ref, q *engine.Model, parts ...string) (float64, error) {
	var num, den float64
	for il := range ref.Params.Layers {
		for _, part := range parts {
			name := fmt.Sprintf("blk.%d.ffn_%s_exps.weight", il, part)
			acts := a.in
			if part == "down" {
				acts = a.mid
			}
			for e := range a.experts {
				xs := acts[[2]int{il, e}]
				if len(xs) == 0 {
					continue
				}
				w, rows, cols, err := expertMatrix(ref, name, e)
				if err != nil {
					return 0, err
				}
				qm, _, _, err := expertMatrix(q, name, e)
				if err != nil {
					return 0, err
				}
				for x := 0; x+cols <= len(xs); x += cols {
					row := xs[x : x+cols]
					for r := range rows {
						var wx, qx float64
						for c, v := range row {
							wx += float64(w[r*cols+c]) * float64(v)
							qx += float64(qm[r*cols+c]) * float64(v)
						}
						num += (wx - qx) * (wx - qx)
						den += wx * wx
					}
				}
			}
		}
	}
	if den == 0 {
		return 0, nil
	}
	return num / den, nil
}

// expertMatrix dequantizes expert e of a routed-expert tensor of m.
func expertMatrix(m *engine.Model, name string, e int) (w []float32, rows, cols int, err error) {
	t, ok := m.File.Tensor(name)
	if !ok || len(t.Dims) != 3 {
		return nil, 0, 0, fmt.Errorf("no routed-expert tensor %s", name)
	}
	cols, rows = int(t.Dims[0]), int(t.Dims[1])
	rb, err := t.Type.RowBytes(cols)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("%s: %w", name, err)
	}
	data := m.File.TensorData(t)
	w = make([]float32, rows*cols)
	for r := range rows {
		off := (e*rows + r) * rb
		if err := quant.DequantizeRow(t.Type, data[off:off+rb], w[r*cols:(r+1)*cols]); err != nil {
			return nil, 0, 0, fmt.Errorf("%s: %w", name, err)
		}
	}
	return w, rows, cols, nil
}

// SummarizeStudy returns the prefill rows of a study, in the order they
// were measured.
func SummarizeStudy(rows []StudyRow) []StudyRow {
	var out []StudyRow
	for _, r := range rows {
		if r.Path == "prefill" {
			out = append(out, r)
		}
	}
	return out
}

// StudyEffect is what the imatrix changes for one case and recipe on the
// prefill path.
type StudyEffect struct {
	Case, Recipe string
	KLChange     float64 // relative change of the mean KL against f32ref: (with − without) / without
	KLDeltaMean  float64 // mean per-position KL difference, with − without
	KLDeltaSE    float64 // its standard error
	Improved     float64 // fraction of positions where the KL is lower with the imatrix
	GateUpChange float64 // relative change of the gate/up output error (GateUpRelErr)
	// The same on the held-out prompts (against the lossless conversion).
	HeldoutKLChange, HeldoutDeltaMean, HeldoutDeltaSE, HeldoutImproved float64
}

// ImatrixEffects pairs the prefill rows with and without the imatrix of
// every case and recipe that has both, in measurement order.
func ImatrixEffects(rows []StudyRow) []StudyEffect {
	without := map[string]StudyRow{}
	var out []StudyEffect
	for _, r := range SummarizeStudy(rows) {
		k := r.Case + "/" + r.Recipe
		switch r.Imatrix {
		case StudyNoImatrix:
			without[k] = r
		case StudyImatrixCollected:
			w, ok := without[k]
			if !ok {
				continue
			}
			e := StudyEffect{Case: r.Case, Recipe: r.Recipe, KLChange: relChange(r.F32RefMeanKL, w.F32RefMeanKL),
				KLDeltaMean: r.KLDeltaMean, KLDeltaSE: r.KLDeltaSE, Improved: r.KLImprovedFrac,
				GateUpChange:    relChange(r.GateUpRelErr, w.GateUpRelErr),
				HeldoutKLChange: relChange(r.HeldoutMeanKL, w.HeldoutMeanKL), HeldoutDeltaMean: r.HeldoutKLDeltaMean,
				HeldoutDeltaSE: r.HeldoutKLDeltaSE, HeldoutImproved: r.HeldoutImprovedFrac}
			out = append(out, e)
		}
	}
	return out
}

// relChange returns (a − b) / b, or 0 when b is 0.
func relChange(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return (a - b) / b
}

// StudyTable is the directory of quality-study runs under a results root.
const StudyTable = "quality_study"

// StudyRecord is one row of a study's Parquet file: the run and one
// measurement.
type StudyRecord struct {
	RunMeta
	StudyRow
}

// WriteStudyRun writes a study as one Parquet file under
// root/quality_study and returns its path.
func WriteStudyRun(root string, meta RunMeta, rows []StudyRow) (string, error) {
	recs := make([]StudyRecord, len(rows))
	for i, r := range rows {
		recs[i] = StudyRecord{RunMeta: meta, StudyRow: r}
	}
	return WriteRun(root, StudyTable, meta, recs)
}
