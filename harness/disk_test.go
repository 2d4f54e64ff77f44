package harness

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestGBs(t *testing.T) {
	for _, c := range []struct {
		bytes int64
		d     time.Duration
		want  float64
	}{
		{7 << 20, 10 * time.Millisecond, 0.7340032}, // 7 MiB in 10 ms
		{1e9, time.Second, 1},
		{64 * (7 << 20), 500 * time.Millisecond, 0.9395240960},
		{1 << 20, 0, 0},
	} {
		require.InDelta(t, c.want, GBs(c.bytes, c.d), 1e-9, "%d bytes in %v", c.bytes, c.d)
	}
}

// TestRandomOffsets checks that the probe's offsets are aligned, leave
// room for a whole read, are the same for a seed, and cover the file.
func TestRandomOffsets(t *testing.T) {
	const size, block = 100<<20 + 123, 7 << 20
	offs := RandomOffsets(size, block, DiskAlign, 2000, 3)
	require.Equal(t, offs, RandomOffsets(size, block, DiskAlign, 2000, 3))
	lo, hi := int64(size), int64(0)
	for _, o := range offs {
		require.Zero(t, o%DiskAlign)
		require.GreaterOrEqual(t, o, int64(0))
		require.LessOrEqual(t, o+block, int64(size))
		lo, hi = min(lo, o), max(hi, o)
	}
	// 2000 draws from 23,808 slots reach both ends' tenth.
	require.Less(t, lo, int64(size/10))
	require.Greater(t, hi, int64(size-block-size/10))
	// A file of exactly one read has one offset: 0.
	require.Equal(t, []int64{0, 0}, RandomOffsets(block, block, DiskAlign, 2, 1))
}

// TestStreamingLimit checks the SSD streaming speed of light against
// hand-computed values: memory-bound when the misses are few, disk-bound
// when they are many.
func TestStreamingLimit(t *testing.T) {
	for _, c := range []struct {
		name                 string
		memTPS, hit          float64
		requests             int
		expert               int64
		disk                 float64
		misses, bytes, limit float64
	}{
		// 4 layers × 6 experts, 90 % hits: 2.4 misses of 7 MB = 16.8 MB
		// at 1 GB/s = 16.8 ms; memory 1/24 s = 41.7 ms: memory-bound.
		{"memory-bound", 24, 0.9, 24, 7e6, 1, 2.4, 16.8e6, 24},
		// 50 % hits: 12 misses, 84 MB at 1.2 GB/s = 70 ms: 14.29 tok/s.
		{"disk-bound", 24, 0.5, 24, 7e6, 1.2, 12, 84e6, 1 / 0.07},
		// Flash: 43 layers × 6, 80 % hits: 51.6 misses × 7.08 MB =
		// 365.3 MB at 1.4 GB/s = 0.2609 s: 3.832 tok/s.
		{"flash", 10, 0.8, 258, 7.08e6, 1.4, 51.6, 365.328e6, 1.4e9 / 365.328e6},
		{"all hits", 24, 1, 24, 7e6, 1, 0, 0, 24},
		{"no disk figure", 24, 0.5, 24, 7e6, 0, 12, 84e6, 0},
	} {
		l := StreamingLimit(c.memTPS, c.hit, c.requests, c.expert, c.disk)
		require.InDelta(t, c.misses, l.SSDMissesPerToken, 1e-9, c.name)
		require.InDelta(t, c.bytes, l.SSDMissBytesPerToken, 1e-3, c.name)
		require.InDelta(t, c.limit, l.SSDDecodeLimitTPS, 1e-9, c.name)
		require.Equal(t, c.hit, l.SSDHitRate, c.name)
	}
}

// TestProbeDisk probes a small file: every figure positive, and the same
// read size; O_DIRECT or not as the temporary directory's file system
// allows.
func TestProbeDisk(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model.bin")
	require.NoError(t, os.WriteFile(path, make([]byte, 3<<20+100), 0o644))
	d, err := ProbeDisk(context.Background(), path, DiskConfig{Block: 64 << 10, Bytes: 1 << 20, Seed: 1})
	require.NoError(t, err)
	require.Equal(t, int64(64<<10), d.DiskBlockBytes)
	require.Positive(t, d.DiskSeqGBs)
	require.Positive(t, d.DiskRand1GBs)
	require.Positive(t, d.DiskRand8GBs)
	t.Logf("%+v", d)

	_, err = ProbeDisk(context.Background(), path, DiskConfig{Block: 1000, Bytes: 1 << 20})
	require.ErrorContains(t, err, "multiple of 4096")
	_, err = ProbeDisk(context.Background(), path, DiskConfig{Block: 4 << 20, Bytes: 1 << 20})
	require.ErrorContains(t, err, "less than one read")
	_, err = ProbeDisk(context.Background(), filepath.Join(t.TempDir(), "missing"), DefaultDiskConfig())
	require.Error(t, err)
}

// TestRooflineRecordsSSD checks that a run's rows carry the disk probe's
// figures and, when the speed run streamed, the streaming limit (at the
// faster random bandwidth, 1 or 8 in flight), the wrong prefetches per
// token, the decode's disk figures and the decode fraction of the limit;
// a run that did not stream leaves them 0.
func TestRooflineRecordsSSD(t *testing.T) {
	parts := []Traffic{{Part: "total", Bytes: 1e9}}
	mc := Machine{ReadGBsAll: 24} // memory-bound limit: 24 tok/s
	disk8 := Disk{DiskSeqGBs: 0.9, DiskRand1GBs: 1, DiskRand8GBs: 1.2, DiskBlockBytes: 7 << 20, DiskDirect: true}
	disk1 := Disk{DiskSeqGBs: 0.9, DiskRand1GBs: 1.4, DiskRand8GBs: 1.2, DiskBlockBytes: 7 << 20, DiskDirect: true}
	for _, c := range []struct {
		name      string
		disk      Disk
		streaming bool
		limit     float64
	}{
		{"streaming", disk8, true, 1 / 0.07},            // 12 misses × 7 MB at 1.2 GB/s
		{"one in flight faster", disk1, true, 1 / 0.06}, // at 1.4 GB/s
		{"mapped", disk8, false, 0},
	} {
		r := &Roofline{Machine: mc, Parts: parts, Speed: Speed{DecodeTokens: 16, DecodeTPS: 10}, Disk: c.disk,
			Streaming: c.streaming, HitRate: 0.5, WasteRate: 0.125, DiskBusy: 0.75, DiskReadGBs: 1.1, ExpertRequests: 24, ExpertBytes: 7e6}
		recs := r.Records(RunMeta{})
		require.Len(t, recs, 1, c.name)
		rec := recs[0]
		require.Equal(t, c.disk, rec.Disk, c.name)
		require.InDelta(t, 24, rec.DecodeLimitTPS, 1e-9, c.name)
		require.InDelta(t, c.limit, rec.SSDDecodeLimitTPS, 1e-9, c.name)
		if c.streaming {
			require.InDelta(t, 10/c.limit, rec.SSDDecodeFraction, 1e-9, c.name)
			require.InDelta(t, 3, rec.SSDWastedPerToken, 1e-9, c.name)
			require.Equal(t, [2]float64{0.75, 1.1}, [2]float64{rec.SSDDiskBusy, rec.SSDDiskReadGBs}, c.name)
		} else {
			require.Zero(t, rec.SSDDecodeFraction+rec.SSDHitRate+rec.SSDMissesPerToken+rec.SSDWastedPerToken+rec.SSDDiskBusy+rec.SSDDiskReadGBs, c.name)
		}
	}
}

// TestDiskBest checks that Best keeps each rate's better figure and the
// probe's other fields.
func TestDiskBest(t *testing.T) {
	a := Disk{DiskSeqGBs: 2, DiskRand1GBs: 1, DiskRand8GBs: 3, DiskBlockBytes: 7 << 20, DiskDirect: true}
	b := Disk{DiskSeqGBs: 1, DiskRand1GBs: 2.5, DiskRand8GBs: 2, DiskBlockBytes: 7 << 20, DiskDirect: true}
	require.Equal(t, Disk{DiskSeqGBs: 2, DiskRand1GBs: 2.5, DiskRand8GBs: 3, DiskBlockBytes: 7 << 20, DiskDirect: true}, a.Best(b))
	require.Equal(t, a.Best(b), b.Best(a))
}

// TestProbeOffsets checks that the disk probes read aligned blocks inside
// the file, the sequential one a run of consecutive blocks, and that no
// two probes, nor two seeds, read the same offsets: a virtual disk's host
// would serve a repeated read from its cache.
func TestProbeOffsets(t *testing.T) {
	const size = 10 << 30
	cfg := DiskConfig{Block: 7 << 20, Bytes: 512 << 20}
	seq, rnd1, rnd8 := probeOffsets(size, cfg, 7)
	require.Len(t, seq, 73)
	for i, o := range seq {
		require.Equal(t, seq[0]+int64(i)*cfg.Block, o)
	}
	for _, offs := range [][]int64{seq, rnd1, rnd8} {
		require.Len(t, offs, 73)
		for _, o := range offs {
			require.Zero(t, o%DiskAlign)
			require.True(t, o >= 0 && o+cfg.Block <= size, "offset %d", o)
		}
	}
	require.NotEqual(t, rnd1, rnd8)
	seq2, rnd12, _ := probeOffsets(size, cfg, 8)
	require.NotEqual(t, seq[0], seq2[0])
	require.NotEqual(t, rnd1, rnd12)
	// A file no larger than the probe: one run from its start.
	seq, _, _ = probeOffsets(3*cfg.Block, cfg, 9)
	require.Equal(t, []int64{0, cfg.Block, 2 * cfg.Block}, seq)
}
