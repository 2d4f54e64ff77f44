package harness

import (
	"fmt"

	"github.com/ds4-go/ds4/convert/checkpoint"
	"github.com/ds4-go/ds4/engine/tokenizer"
)

// ParseStudyRecipes parses the quantized recipes of a study (StudyOptions
// Recipes); the lossless conversions are refused, since the study always
// measures the lossless one.
func ParseStudyRecipes(names []string) ([]checkpoint.Mode, error) {
	var modes []checkpoint.Mode
	for _, s := range names {
		m, err := checkpoint.ParseMode(s)
		if err != nil {
			return nil, err
		}
		if m == checkpoint.ModeLossless || m == checkpoint.ModeF32 {
			return nil, fmt.Errorf("--recipes %s: the lossless conversion is always measured; give quantized recipes", s)
		}
		modes = append(modes, m)
	}
	return modes, nil
}

// SplitHoldout renders each prompt as a chat user message without a
// system text (EncodeChat) and splits the token sequences: every
// holdout-th prompt (the holdout-th, the 2·holdout-th, …) is held out,
// the others calibrate; holdout 0 holds none out (StudyOptions Prompts
// and Heldout).
func SplitHoldout(tok *tokenizer.Tokenizer, prompts []PromptCase, holdout int) (calib, heldout [][]int) {
	for i, p := range prompts {
		ids := EncodeChat(tok, "", p.Prompt)
		if holdout > 0 && i%holdout == holdout-1 {
			heldout = append(heldout, ids)
		} else {
			calib = append(calib, ids)
		}
	}
	return calib, heldout
}
