package kvcache

import (
	"bytes"
	"encoding/binary"
)

// ToolEntry maps a tool-call id to the exact DSML block it was sampled in
// (docs/formats/kvcache.md#tool-id-map).
type ToolEntry struct {
	ID   string
	DSML string
}

// Tool-map section limits (docs/formats/kvcache.md#tool-id-map).
const (
	toolMapHeader  = 8
	maxToolIDLen   = 256
	maxToolDSMLLen = 512 << 20
)

// encodeToolMap returns the "KTM" v1 section for entries, or nil when
// there are none. Entries with an empty or over-long id or block are
// skipped.
func encodeToolMap(entries []ToolEntry) []byte {
	var n uint32
	size := toolMapHeader
	for _, e := range entries {
		if ok := validToolEntry(len(e.ID), len(e.DSML)); ok {
			n++
			size += 8 + len(e.ID) + len(e.DSML)
		}
	}
	if n == 0 {
		return nil
	}
	b := make([]byte, toolMapHeader, size)
	copy(b, "KTM\x01")
	binary.LittleEndian.PutUint32(b[4:], n)
	for _, e := range entries {
		if !validToolEntry(len(e.ID), len(e.DSML)) {
			continue
		}
		b = binary.LittleEndian.AppendUint32(b, uint32(len(e.ID)))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(e.DSML)))
		b = append(b, e.ID...)
		b = append(b, e.DSML...)
	}
	return b
}

func validToolEntry(idLen, dsmlLen int) bool {
	return idLen >= 1 && idLen <= maxToolIDLen && dsmlLen >= 1 && dsmlLen <= maxToolDSMLLen
}

// decodeToolMap reads a tool-map section. Like upstream it stops silently
// at the first violation or short read, keeping the entries before it;
// a wrong magic or version yields nothing. maxEntries bounds the declared
// count (0: no bound); wanted, when not nil, filters ids.
func decodeToolMap(b []byte, maxEntries int, wanted func(id string) bool) []ToolEntry {
	if len(b) < toolMapHeader || string(b[:4]) != "KTM\x01" {
		return nil
	}
	n := binary.LittleEndian.Uint32(b[4:])
	if maxEntries > 0 && uint64(n) > uint64(maxEntries) {
		return nil
	}
	b = b[toolMapHeader:]
	var out []ToolEntry
	for range n {
		if len(b) < 8 {
			break
		}
		il, dl := binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint32(b[4:])
		if !validToolEntry(int(il), int(dl)) || uint64(len(b)-8) < uint64(il)+uint64(dl) {
			break
		}
		id := string(b[8 : 8+il])
		if wanted == nil || wanted(id) {
			out = append(out, ToolEntry{ID: id, DSML: string(b[8+il : 8+il+dl])})
		}
		b = b[8+il+dl:]
	}
	return out
}

// dsmlForms are the tool-call block delimiters of docs/formats/kvcache.md#finding-dsml-blocks, in
// upstream's preference order for blocks starting at the same byte.
var dsmlForms = [][2]string{
	{"\n\n<｜DSML｜tool_calls>", "</｜DSML｜tool_calls>"},
	{"<｜DSML｜tool_calls>", "</｜DSML｜tool_calls>"},
	{"\n\n<DSML｜tool_calls>", "</DSML｜tool_calls>"},
	{"<DSML｜tool_calls>", "</DSML｜tool_calls>"},
	{"\n\n<tool_calls>", "</tool_calls>"},
	{"<tool_calls>", "</tool_calls>"},
}

// DSMLBlocks returns the tool-call blocks of a key text in order: from a
// cursor, the earliest opener (of any form) whose closer follows it, the
// block running through the end of the closer (docs/formats/kvcache.md#finding-dsml-blocks).
func DSMLBlocks(text []byte) [][]byte {
	var out [][]byte
	for p := 0; p < len(text); {
		best, bestEnd := -1, -1
		for _, f := range dsmlForms {
			s := bytes.Index(text[p:], []byte(f[0]))
			if s < 0 || (best >= 0 && p+s >= best) {
				continue
			}
			e := bytes.Index(text[p+s:], []byte(f[1]))
			if e < 0 {
				continue
			}
			best, bestEnd = p+s, p+s+e+len(f[1])
		}
		if best < 0 {
			break
		}
		out = append(out, text[best:bestEnd])
		p = bestEnd
	}
	return out
}

// ToolEntriesFor returns the tool-map entries of a key text: for every
// distinct DSML block in key, each id idsOf maps to it (docs/formats/kvcache.md#tool-id-map).
// idsOf is typically a lookup in the server's tool memory.
func ToolEntriesFor(key []byte, idsOf func(block string) []string) []ToolEntry {
	if idsOf == nil {
		return nil
	}
	seen := map[string]bool{}
	var out []ToolEntry
	for _, b := range DSMLBlocks(key) {
		block := string(b)
		if seen[block] {
			continue
		}
		seen[block] = true
		for _, id := range idsOf(block) {
			out = append(out, ToolEntry{ID: id, DSML: block})
		}
	}
	return out
}
