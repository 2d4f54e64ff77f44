package harness

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ds4-go/ds4/internal/mmap"
)

// Disk is the disk probe's figures, read from the model file.
type Disk struct {
	DiskSeqGBs     float64 `parquet:"disk_seq_gbs"`     // sequential reads of DiskBlockBytes, one in flight
	DiskRand1GBs   float64 `parquet:"disk_rand1_gbs"`   // random positioned reads of DiskBlockBytes, one in flight
	DiskRand8GBs   float64 `parquet:"disk_rand8_gbs"`   // the same, 8 in flight
	DiskBlockBytes int64   `parquet:"disk_block_bytes"` // bytes of one read
	DiskDirect     bool    `parquet:"disk_direct"`      // read with O_DIRECT; false: buffered, the file dropped from the page cache first
}

// Best returns d with each rate the better of d's and o's: the disk's
// speed drifts (a cloud volume's burst credits, other tenants), and the
// best of probes around a run keeps the fraction of its limit
// conservative.
func (d Disk) Best(o Disk) Disk {
	d.DiskSeqGBs = max(d.DiskSeqGBs, o.DiskSeqGBs)
	d.DiskRand1GBs = max(d.DiskRand1GBs, o.DiskRand1GBs)
	d.DiskRand8GBs = max(d.DiskRand8GBs, o.DiskRand8GBs)
	return d
}

// DiskConfig configures ProbeDisk.
type DiskConfig struct {
	Block int64  // bytes of one read, a multiple of DiskAlign
	Bytes int64  // bytes each of the three probes reads, at most the file's
	Seed  uint64 // of the offsets; 0 draws a seed from the clock at each probe
}

// DiskAlign is the alignment of the disk probe's offsets, sizes and
// buffers, which O_DIRECT needs (the logical block size of common disks is
// 512 or 4096 bytes).
const DiskAlign = 4096

// ExpertReadBytes is the disk probe's default read when no model says
// better: about one expert of DeepSeek V4 Flash q2 (its gate, up and down
// slices, 7.08 MB), rounded to whole MiB.
const ExpertReadBytes = 7 << 20

// DefaultDiskConfig returns the disk probe's defaults: 7 MiB reads, 1 GiB
// read by each probe, at offsets drawn afresh for each probe.
func DefaultDiskConfig() DiskConfig {
	return DiskConfig{Block: ExpertReadBytes, Bytes: 1 << 30}
}

// ProbeDisk measures the disk under the file at path: sequential reads,
// then random positioned reads with 1 and with 8 in flight, each read
// cfg.Block bytes at an aligned offset, cfg.Bytes in all per probe. It
// reads with O_DIRECT where the file system allows, so the page cache
// neither serves nor keeps the bytes; elsewhere it reads through the
// page cache, asking the kernel to drop the file from it before each
// probe.
func ProbeDisk(ctx context.Context, path string, cfg DiskConfig) (Disk, error) {
	if cfg.Block <= 0 || cfg.Block%DiskAlign != 0 {
		return Disk{}, fmt.Errorf("harness: disk probe: block %d is not a positive multiple of %d", cfg.Block, DiskAlign)
	}
	if f, err := openDirect(path); err == nil {
		d, err := probeFile(ctx, f, cfg, true)
		f.Close()
		// A file system may take O_DIRECT at open and refuse the reads.
		if !errors.Is(err, errDirectRefused) {
			return d, err
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return Disk{}, fmt.Errorf("harness: disk probe: %w", err)
	}
	defer f.Close()
	return probeFile(ctx, f, cfg, false)
}

// probeFile runs ProbeDisk's probes on f, opened with O_DIRECT when
// direct.
func probeFile(ctx context.Context, f *os.File, cfg DiskConfig, direct bool) (Disk, error) {
	fi, err := f.Stat()
	if err != nil {
		return Disk{}, fmt.Errorf("harness: disk probe: %w", err)
	}
	if fi.Size() < cfg.Block {
		return Disk{}, fmt.Errorf("harness: disk probe: %s has %d bytes, less than one read of %d", f.Name(), fi.Size(), cfg.Block)
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	seq, rnd1, rnd8 := probeOffsets(fi.Size(), cfg, seed)
	d := Disk{DiskBlockBytes: cfg.Block, DiskDirect: direct}
	for _, p := range []struct {
		offs   []int64
		flight int
		dst    *float64
	}{{seq, 1, &d.DiskSeqGBs}, {rnd1, 1, &d.DiskRand1GBs}, {rnd8, 8, &d.DiskRand8GBs}} {
		if !direct {
			dropCache(f)
		}
		el, err := timeReads(ctx, f, p.offs, cfg.Block, p.flight)
		if err != nil {
			return Disk{}, fmt.Errorf("harness: disk probe: %w", err)
		}
		*p.dst = GBs(int64(len(p.offs))*cfg.Block, el)
	}
	return d, nil
}

// probeOffsets returns the offsets of ProbeDisk's three probes of a file
// of size bytes: a run of consecutive blocks from a random aligned start,
// and two sets of random aligned offsets, each its own. A virtual disk's
// host keeps the blocks read lately in its own cache, which O_DIRECT does
// not bypass: probes that read the blocks another probe, or the last
// run's probe, read would measure that cache, not the disk.
func probeOffsets(size int64, cfg DiskConfig, seed uint64) (seq, rnd1, rnd8 []int64) {
	reads := int(max(1, min(cfg.Bytes, size)/cfg.Block))
	run := int64(reads) * cfg.Block
	start := RandomOffsets(size-run+cfg.Block, cfg.Block, DiskAlign, 1, seed)[0]
	seq = make([]int64, reads)
	for i := range seq {
		seq[i] = start + int64(i)*cfg.Block
	}
	return seq, RandomOffsets(size, cfg.Block, DiskAlign, reads, seed+1), RandomOffsets(size, cfg.Block, DiskAlign, reads, seed+2)
}

// errDirectRefused marks a read that O_DIRECT refused (EINVAL).
var errDirectRefused = errors.New("O_DIRECT read refused")

// timeReads reads block bytes at each of offs, flight reads in flight,
// and returns the time taken.
func timeReads(ctx context.Context, f *os.File, offs []int64, block int64, flight int) (time.Duration, error) {
	// The expert cache's slots are on huge pages (mmap.Anon), and so are
	// the probe's buffers, so that its reads go to the device as the
	// cache's do; Anon faults them in before the clock starts, as a
	// running cache's slots are.
	bufs, free, err := mmap.Anon(flight * int(block))
	if err != nil {
		return 0, err
	}
	defer free()
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	start := time.Now()
	for r := range flight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := bufs[int64(r)*block : int64(r+1)*block]
			for {
				i := int(next.Add(1)) - 1
				if i >= len(offs) || ctx.Err() != nil {
					return
				}
				if err := readFull(f, buf, offs[i]); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	if first != nil {
		return 0, first
	}
	return el, ctx.Err()
}

// readFull reads len(buf) bytes at off; a read short of the end of the
// file is an error.
func readFull(f *os.File, buf []byte, off int64) error {
	for n := 0; n < len(buf); {
		k, err := f.ReadAt(buf[n:], off+int64(n))
		n += k
		if err != nil {
			if isEINVAL(err) {
				return fmt.Errorf("%w: %v", errDirectRefused, err)
			}
			return fmt.Errorf("read %d bytes at %d: %w", len(buf), off, err)
		}
	}
	return nil
}

// RandomOffsets returns n offsets, multiples of align, drawn uniformly
// from those where a read of block bytes ends within size bytes, from a
// generator seeded with seed.
func RandomOffsets(size, block, align int64, n int, seed uint64) []int64 {
	slots := (size-block)/align + 1
	rng := rand.New(rand.NewPCG(seed, 0x5ca1ab1e))
	out := make([]int64, n)
	for i := range out {
		out[i] = rng.Int64N(slots) * align
	}
	return out
}

// GBs returns the rate of bytes read in d, in GB/s (10⁹ bytes); 0 for no
// time.
func GBs(bytes int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(bytes) / d.Seconds() / 1e9
}

// SSDLimit is the decode speed of light with SSD streaming: the larger of
// a token's memory time and the disk time of its expected misses.
type SSDLimit struct {
	SSDHitRate           float64 `parquet:"ssd_hit_rate"`             // of the speed run's expert requests: the share that needed no read
	SSDMissesPerToken    float64 `parquet:"ssd_misses_per_token"`     // (1 − hit rate) × routed experts per token
	SSDWastedPerToken    float64 `parquet:"ssd_wasted_per_token"`     // prefetched experts per token no step used
	SSDMissBytesPerToken float64 `parquet:"ssd_miss_bytes_per_token"` // misses × bytes of one expert
	SSDDecodeLimitTPS    float64 `parquet:"ssd_decode_limit_tps"`     // 1 / max(memory time, disk time)
	SSDDecodeFraction    float64 `parquet:"ssd_decode_fraction"`      // decode tok/s over SSDDecodeLimitTPS
	SSDDiskBusy          float64 `parquet:"ssd_disk_busy"`            // share of the timed decode with expert reads in flight
	SSDDiskReadGBs       float64 `parquet:"ssd_disk_read_gbs"`        // the timed decode's expert reads' bytes over the time they were in flight
}

// StreamingLimit returns the SSD streaming decode speed of light from the
// memory-bound one memTPS (the read bandwidth over the decode traffic), a
// measured hit rate, the routed experts a token requests (layers × experts
// used), the bytes of one expert and the disk's bandwidth diskGBs: a
// token takes the longer of 1/memTPS and its expected misses' bytes at
// diskGBs. It is 0 when either figure is missing.
func StreamingLimit(memTPS, hitRate float64, requests int, expertBytes int64, diskGBs float64) SSDLimit {
	l := SSDLimit{SSDHitRate: hitRate}
	l.SSDMissesPerToken = (1 - hitRate) * float64(requests)
	l.SSDMissBytesPerToken = l.SSDMissesPerToken * float64(expertBytes)
	if memTPS <= 0 || diskGBs <= 0 {
		return l
	}
	t := max(1/memTPS, l.SSDMissBytesPerToken/(diskGBs*1e9))
	l.SSDDecodeLimitTPS = 1 / t
	return l
}
