package kvcache

import (
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
)

// File format versions (the byte after "KVC").
const (
	// VersionUpstream is upstream ds4's KVC version 1: 48-byte header,
	// key text, a PayloadV1 payload, optional sections; no checksums.
	VersionUpstream = 1
	// VersionGo is the ds4-go format: 128-byte checksummed header, key
	// text, a PayloadGo payload (possibly a delta on a parent file),
	// optional sections covered by a CRC.
	VersionGo = 0x81
)

// Header sizes.
const (
	upstreamHeaderSize = 48
	goHeaderSize       = 128
)

// Reason is why a checkpoint was saved (docs/formats/kvcache.md#header).
type Reason uint8

// Save reasons.
const (
	ReasonUnknown Reason = iota
	ReasonCold
	ReasonContinued
	ReasonEvict
	ReasonShutdown
	ReasonAgentSystem
	ReasonAgentSession
)

var reasonNames = [...]string{"unknown", "cold", "continued", "evict", "shutdown", "agent-system", "agent-session"}

// String returns the reason's name as upstream logs it.
func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return "unknown"
}

// Extension flags (header byte 6).
const (
	ExtToolMap          = 1 << 0 // a tool-id map section follows the payload
	ExtResponsesVisible = 1 << 1 // the key is a Responses visible transcript
	ExtThinkingVisible  = 1 << 2 // the key is a thinking visible transcript
)

// KeyKind says what a file's key text is (docs/formats/kvcache.md#key-kinds).
type KeyKind uint8

// Key kinds; the values are the extension bits that mark them.
const (
	KeyTokenText        KeyKind = 0
	KeyResponsesVisible KeyKind = ExtResponsesVisible
	KeyThinkingVisible  KeyKind = ExtThinkingVisible
)

// String returns the key kind's name.
func (k KeyKind) String() string {
	switch k {
	case KeyResponsesVisible:
		return "responses-visible"
	case KeyThinkingVisible:
		return "thinking-visible"
	}
	return "token-text"
}

// kindOf returns the key kind marked in extension flags (Responses first).
func kindOf(ext uint8) KeyKind {
	switch {
	case ext&ExtResponsesVisible != 0:
		return KeyResponsesVisible
	case ext&ExtThinkingVisible != 0:
		return KeyThinkingVisible
	}
	return KeyTokenText
}

// ds4-go header byte 7.
const (
	numOfficial = 1 << 0 // written by a NumericsOfficial session
	numF16      = 1 << 1 // payload rows are binary16
)

// Header is the fixed header of a cache file, in either format.
type Header struct {
	Version      uint8
	QuantBits    uint8 // routed-expert quantization: 2 or 4
	Reason       Reason
	Ext          uint8 // extension flags
	Numerics     uint8 // ds4-go: numOfficial, numF16
	Tokens       uint32
	Hits         uint32
	Ctx          uint32
	Created      uint64 // Unix seconds
	LastUsed     uint64 // Unix seconds
	PayloadBytes uint64
	KeyLen       uint32 // upstream: the u32 after the header

	// ds4-go fields.
	SectionBytes uint64   // bytes of sections after the payload
	SectionCRC   uint32   // CRC-32C of those bytes
	FileID       uint64   // random identity of this file's content
	ParentID     uint64   // FileID of the parent; 0 for a self-contained file
	ParentTokens uint32   // tokens the parent holds (the payload's base)
	ParentSHA    [20]byte // SHA-1 key of the parent file
	TokensDigest [20]byte // SHA-1 of the token ids as u32 little-endian
	statsOK      bool     // the hit/last-used block passed its CRC
}

// dataOffset returns the offset of the key text.
func (h *Header) dataOffset() int64 {
	if h.Version == VersionGo {
		return goHeaderSize
	}
	return upstreamHeaderSize + 4
}

// payloadOffset returns the offset of the payload.
func (h *Header) payloadOffset() int64 { return h.dataOffset() + int64(h.KeyLen) }

// minSize returns the smallest file size the header allows; ds4-go files
// must have exactly this size.
func (h *Header) minSize() int64 {
	return h.payloadOffset() + int64(h.PayloadBytes) + int64(h.SectionBytes)
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Errors wrapped by header decoding.
var (
	errNotCache = errors.New("not a KVC cache file")
	errVersion  = errors.New("unsupported KVC version")
	errCorrupt  = errors.New("corrupt cache file")
)

// encode returns the header bytes (for VersionUpstream including the key
// length word).
func (h *Header) encode() []byte {
	le := binary.LittleEndian
	if h.Version != VersionGo {
		b := make([]byte, upstreamHeaderSize+4)
		copy(b, "KVC")
		b[3], b[4], b[5], b[6] = VersionUpstream, h.QuantBits, uint8(h.Reason), h.Ext
		le.PutUint32(b[8:], h.Tokens)
		le.PutUint32(b[12:], h.Hits)
		le.PutUint32(b[16:], h.Ctx)
		le.PutUint64(b[24:], h.Created)
		le.PutUint64(b[32:], h.LastUsed)
		le.PutUint64(b[40:], h.PayloadBytes)
		le.PutUint32(b[48:], h.KeyLen)
		return b
	}
	b := make([]byte, goHeaderSize)
	copy(b, "KVC")
	b[3], b[4], b[5], b[6], b[7] = VersionGo, h.QuantBits, uint8(h.Reason), h.Ext, h.Numerics
	le.PutUint32(b[8:], h.Tokens)
	le.PutUint32(b[12:], h.KeyLen)
	le.PutUint32(b[16:], h.Ctx)
	le.PutUint32(b[20:], h.ParentTokens)
	le.PutUint64(b[24:], h.Created)
	le.PutUint64(b[32:], h.PayloadBytes)
	le.PutUint64(b[40:], h.SectionBytes)
	le.PutUint64(b[48:], h.FileID)
	le.PutUint64(b[56:], h.ParentID)
	copy(b[64:84], h.ParentSHA[:])
	copy(b[84:104], h.TokensDigest[:])
	le.PutUint32(b[104:], h.SectionCRC)
	le.PutUint32(b[108:], crc32.Checksum(b[:108], castagnoli))
	copy(b[112:], h.encodeStats())
	return b
}

// encodeStats returns the ds4-go mutable block: hits, its CRC, last used.
func (h *Header) encodeStats() []byte {
	b := make([]byte, 16)
	binary.LittleEndian.PutUint32(b, h.Hits)
	binary.LittleEndian.PutUint64(b[8:], h.LastUsed)
	binary.LittleEndian.PutUint32(b[4:], statsCRC(b))
	return b
}

func statsCRC(b []byte) uint32 {
	c := crc32.Update(0, castagnoli, b[:4])
	return crc32.Update(c, castagnoli, b[8:16])
}

// headerPrefix is how many bytes decodeHeader needs for either format.
const headerPrefix = goHeaderSize

// decodeHeader parses a header from the first bytes of a file (up to
// headerPrefix of them) and checks its structure; size is the file size.
func decodeHeader(b []byte, size int64) (Header, error) {
	le := binary.LittleEndian
	var h Header
	if len(b) < 4 || string(b[:3]) != "KVC" {
		return h, errNotCache
	}
	h.Version = b[3]
	switch h.Version {
	case VersionUpstream:
		if len(b) < upstreamHeaderSize+4 {
			return h, fmt.Errorf("%w: %d bytes, shorter than a header", errCorrupt, len(b))
		}
		h.QuantBits, h.Reason, h.Ext = b[4], Reason(b[5]), b[6]
		h.Tokens = le.Uint32(b[8:])
		h.Hits = le.Uint32(b[12:])
		h.Ctx = le.Uint32(b[16:])
		h.Created = le.Uint64(b[24:])
		h.LastUsed = le.Uint64(b[32:])
		h.PayloadBytes = le.Uint64(b[40:])
		h.KeyLen = le.Uint32(b[48:])
		h.statsOK = true
	case VersionGo:
		if len(b) < goHeaderSize {
			return h, fmt.Errorf("%w: %d bytes, shorter than a header", errCorrupt, len(b))
		}
		if crc32.Checksum(b[:108], castagnoli) != le.Uint32(b[108:]) {
			return h, fmt.Errorf("%w: header checksum mismatch", errCorrupt)
		}
		h.QuantBits, h.Reason, h.Ext, h.Numerics = b[4], Reason(b[5]), b[6], b[7]
		h.Tokens = le.Uint32(b[8:])
		h.KeyLen = le.Uint32(b[12:])
		h.Ctx = le.Uint32(b[16:])
		h.ParentTokens = le.Uint32(b[20:])
		h.Created = le.Uint64(b[24:])
		h.PayloadBytes = le.Uint64(b[32:])
		h.SectionBytes = le.Uint64(b[40:])
		h.FileID = le.Uint64(b[48:])
		h.ParentID = le.Uint64(b[56:])
		copy(h.ParentSHA[:], b[64:84])
		copy(h.TokensDigest[:], b[84:104])
		h.SectionCRC = le.Uint32(b[104:])
		st := b[112:128]
		if statsCRC(st) == le.Uint32(st[4:]) {
			h.Hits, h.LastUsed, h.statsOK = le.Uint32(st), le.Uint64(st[8:]), true
		}
	default:
		return h, fmt.Errorf("%w %d", errVersion, h.Version)
	}
	if h.Reason > ReasonAgentSession {
		h.Reason = ReasonUnknown
	}
	switch {
	case h.Tokens == 0:
		return h, fmt.Errorf("%w: zero tokens", errCorrupt)
	case h.QuantBits != 2 && h.QuantBits != 4:
		return h, fmt.Errorf("%w: quant bits %d", errCorrupt, h.QuantBits)
	case h.Version == VersionGo && (h.ParentTokens >= h.Tokens || (h.ParentTokens == 0) != (h.ParentID == 0)):
		return h, fmt.Errorf("%w: parent of %d tokens for %d", errCorrupt, h.ParentTokens, h.Tokens)
	case h.Version == VersionGo && h.Numerics&^(numOfficial|numF16) != 0:
		return h, fmt.Errorf("%w: numerics flags %#x", errCorrupt, h.Numerics)
	case h.PayloadBytes > 1<<50 || h.SectionBytes > 1<<50:
		return h, fmt.Errorf("%w: impossible sizes", errCorrupt)
	case size < h.minSize():
		return h, fmt.Errorf("%w: truncated: %d bytes, the header needs %d", errCorrupt, size, h.minSize())
	case h.Version == VersionGo && size != h.minSize():
		return h, fmt.Errorf("%w: %d bytes, the header describes %d", errCorrupt, size, h.minSize())
	}
	return h, nil
}

// KeySHA returns the file-name hash of a key text: SHA-1 in lowercase hex.
func KeySHA(key []byte) string {
	s := sha1.Sum(key)
	return hex.EncodeToString(s[:])
}

// fileName returns the cache file name of a hex SHA-1.
func fileName(hexSHA string) string { return hexSHA + ".kv" }

// parseName returns the normalized SHA of a cache file name, or false for
// any other name (temporary files included).
func parseName(name string) (string, bool) {
	if len(name) != 43 || !strings.HasSuffix(name, ".kv") {
		return "", false
	}
	h := strings.ToLower(name[:40])
	if _, err := hex.DecodeString(h); err != nil {
		return "", false
	}
	return h, true
}

// TokensDigest returns the SHA-1 of token ids encoded as u32 little-endian,
// the identity ds4-go files record for their checkpoint tokens.
func TokensDigest(tokens []int) [20]byte {
	h := sha1.New()
	var buf [4096]byte
	for len(tokens) > 0 {
		k := min(len(tokens), len(buf)/4)
		for i, t := range tokens[:k] {
			binary.LittleEndian.PutUint32(buf[4*i:], uint32(t))
		}
		h.Write(buf[:4*k])
		tokens = tokens[k:]
	}
	var d [20]byte
	h.Sum(d[:0])
	return d
}
