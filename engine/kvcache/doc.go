// Package kvcache keeps DS4 session checkpoints on disk and reuses them:
// the disk KV cache of docs/formats/kvcache.md, with a Manager that brings one
// live session to each request's prompt (docs/formats/server.md#live-kv-reuse).
//
// # Pieces
//
// A Cache is a directory of checkpoint files named by the SHA-1 of their
// key text (the rendered prefix they stand for) with an in-process index
// built at Open, so lookups never rescan the directory. Store saves a
// session, Load restores the longest checkpoint whose key is a byte
// prefix of a prompt, and eviction keeps the directory under its budget.
// Policy holds the save-moment rules (trim, alignment, chat anchor,
// continued frontiers). A Manager owns one live session and a Cache and
// implements the reuse ladder: live token prefix, live text prefix with
// suffix-only re-tokenization, disk checkpoint, cold prefill, saving at
// the four moments (cold, continued, evict, shutdown) and counting hits
// and misses (Stats).
//
// # File format
//
// Two formats are read and written; Options.Format selects the one
// written. VersionUpstream is upstream ds4's KVC version 1, byte for byte
// (docs/formats/kvcache.md#file-format): a 48-byte header, the u32 key length, the key text, an
// engine.PayloadV1 payload and an optional tool-id map section.
//
// VersionGo (0x81, the default) is the ds4-go format. Upstream readers
// see an unknown version and ignore these files. All integers are
// little-endian:
//
//	0   "KVC", 0x81
//	4   u8  routed-expert quant bits (2 or 4)
//	5   u8  save reason (as upstream)
//	6   u8  extension flags (as upstream: bit 0 tool map, bits 1-2 key kind)
//	7   u8  numerics: bit 0 NumericsOfficial session, bit 1 binary16 rows
//	8   u32 token count T
//	12  u32 key text length
//	16  u32 context the checkpoint was written with
//	20  u32 parent token count B (0: self-contained)
//	24  u64 created (Unix seconds)
//	32  u64 payload bytes
//	40  u64 section bytes (the tool map)
//	48  u64 file id (random; identifies this file's content)
//	56  u64 parent file id (0: self-contained)
//	64  [20] parent key SHA-1
//	84  [20] SHA-1 of the T token ids as u32
//	104 u32 CRC-32C of the sections
//	108 u32 CRC-32C of bytes 0..107
//	112 u32 hits, u32 CRC-32C of hits and last-used, u64 last used
//	128 key text, engine.PayloadGo payload, sections
//
// The payload (see package engine) carries its own CRCs over its header,
// its head (tokens and compressed rows) and its tail (logits, raw window,
// compressor frontiers). A file must be exactly as long as its header
// says. The hit count and last-use time are advisory: they are rewritten
// in place without fsync, and a torn stats block only resets them.
//
// # Frugal writes
//
// A checkpoint whose tokens extend those of an indexed ds4-go file (the
// token digest tells) is written as a delta on it: the file holds only
// the new tokens, the compressed and indexer rows they produced, and the
// fixed-size tail state, and names its parent by key SHA-1, file id and
// token count. Restoring reads the head of every ancestor and the whole
// tail of the last file. Rows are stored as binary16 for NumericsDS4
// sessions (their rows are binary16 values, so this is lossless), and
// frontier slots the compressor overwrites before reading are left out.
// For the Flash shape this makes a payload grow by 6,884 bytes per token
// instead of 13,764, and an agent turn that adds N tokens to a long
// conversation costs N·6,884 bytes plus about 12 MB of tail state instead
// of a rewrite of the whole prefix. Chains are capped (Options.MaxChain;
// then a self-contained file starts a new chain). Every file is still
// self-describing and validated on its own.
//
// # Durability
//
// Files are written to "<name>.tmp.<pid>", fsynced, renamed over the
// final name and the directory is fsynced: a crash leaves the old file or
// the new one. Open deletes stale temporary files. Damage is detected by
// the header CRC and exact size at Open, and by the key hash and payload
// CRCs at Load; damaged ds4-go files (and deltas whose parent is gone or
// was replaced) are deleted, files of other builds or layouts are only
// dropped from the index, and Load falls back to the next candidate. A
// failed load never leaves a partial state: the session is untouched
// (header-level failures) or reset to empty.
//
// VersionUpstream files (written with Options.Format VersionUpstream, the
// server's --kv-cache-upstream-format, or by upstream ds4) carry no
// checksums: only their size, counts and key are checked, so a flipped
// byte in a KV row or a logit loads silently and skews generation.
//
// # Differences from upstream
//
// Besides the format above: eviction scores a delta by its tokens per
// byte of its whole chain, a file's score is the best of its own and its
// descendants', and evicting a file evicts its descendants (for
// self-contained files this is upstream's policy exactly); loading an
// upstream file larger than ColdMaxTokens deletes it as upstream does
// ("consumed"), but a ds4-go file is kept because the live session will
// be saved as a cheap delta on it; Load tries up to four candidates
// instead of one; upstream files written with another prefill chunk are
// accepted because this engine's prefill is chunk-invariant.
//
// # Concurrency
//
// Cache methods are safe for concurrent use and serialized; one process
// should own a directory (Rescan picks up outside changes). A Manager is
// driven by one goroutine; its Stats may be read from others.
package kvcache
