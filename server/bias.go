package server

import (
	"fmt"
	"slices"
	"strconv"
)

// maxLogitBias is OpenAI's limit on the entries of logit_bias.
const maxLogitBias = 300

// logitBias is one logit_bias entry: a bias added to a token's logit.
type logitBias struct {
	id   int
	bias float32
}

// decodeChoices reads the Chat Completions and Completions members "n",
// "best_of" (Completions) and "logit_bias". A response holds one choice,
// so n and best_of must be 1 (400 otherwise). logit_bias maps token ids of this model's vocabulary, as
// decimal strings, to a bias in [-100, 100] that is added to the token's
// logit before each sampling step, as OpenAI documents.
func (s *Server) decodeChoices(f fields, r *request) error {
	if n, ok, err := f.integer("n", 1, maxIntField); err != nil {
		return err
	} else if ok && n != 1 {
		return fieldError("n", fmt.Sprintf("is %d; this server generates one choice per request, so n must be 1", n))
	}
	if r.api == apiCompletions {
		if n, ok, err := f.integer("best_of", 1, maxIntField); err != nil {
			return err
		} else if ok && n != 1 {
			return fieldError("best_of", fmt.Sprintf("is %d; this server generates one completion per request, so best_of must be 1", n))
		}
	}
	o, ok, err := f.object("logit_bias")
	if err != nil || !ok {
		return err
	}
	if len(o) > maxLogitBias {
		return fieldError("logit_bias", fmt.Sprintf("has %d entries; at most %d", len(o), maxLogitBias))
	}
	vocab := s.tok.VocabSize()
	for k := range o {
		id, err := strconv.Atoi(k)
		if err != nil || id < 0 || strconv.Itoa(id) != k {
			return fieldError("logit_bias", fmt.Sprintf("has the key %q; keys must be token ids in decimal", k))
		}
		if id >= vocab {
			return fieldError("logit_bias", fmt.Sprintf("has token id %d, outside the vocabulary of %d tokens", id, vocab))
		}
		b, _, err := o.number(k, -100, 100)
		if err != nil {
			return fieldError("logit_bias", fmt.Sprintf("[%q] must be a number between -100 and 100", k))
		}
		if b != 0 {
			r.logitBias = append(r.logitBias, logitBias{id, float32(b)})
		}
	}
	slices.SortFunc(r.logitBias, func(a, b logitBias) int { return a.id - b.id })
	return nil
}

// applyBias adds each bias to its token's logit, first saving the logits
// it changes in saved (grown as needed), which it returns for restoreBias.
func applyBias(logits []float32, bias []logitBias, saved []float32) []float32 {
	saved = saved[:0]
	for _, b := range bias {
		saved = append(saved, logits[b.id])
		logits[b.id] += b.bias
	}
	return saved
}

// restoreBias puts back the logits applyBias changed.
func restoreBias(logits []float32, bias []logitBias, saved []float32) {
	for i, b := range bias {
		logits[b.id] = saved[i]
	}
}
