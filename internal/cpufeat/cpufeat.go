// Package cpufeat is the one place that reads which SIMD extensions the
// CPU has and whether the environment asks for pure Go (DS4_PUREGO). Every
// kernel set chooses its loops from a Level, the host's or one a test
// builds.
package cpufeat

import "os"

// PureGoEnv is the environment variable that, set to anything but "" or
// "0", makes every kernel run its pure-Go form.
const PureGoEnv = "DS4_PUREGO"

// Level is a group of instruction-set extensions the kernels use; each
// level holds every extension of the ones below it.
type Level int

const (
	// Generic is no extension: the pure-Go kernels.
	Generic Level = iota
	// AVX2 is AVX, AVX2, FMA and F16C.
	AVX2
	// AVX512 adds AVX-512 F and VL.
	AVX512
	// AVX512VNNI adds AVX-512 BW and VNNI (Cascade Lake).
	AVX512VNNI
	// AVX512VBMI adds AVX-512 VBMI, GFNI and BITALG (Ice Lake, Zen 4).
	AVX512VBMI
)

// String returns the level's name: "go", "avx2", "avx512", "avx512vnni"
// or "avx512vbmi".
func (l Level) String() string {
	switch l {
	case Generic:
		return "go"
	case AVX2:
		return "avx2"
	case AVX512:
		return "avx512"
	case AVX512VNNI:
		return "avx512vnni"
	case AVX512VBMI:
		return "avx512vbmi"
	}
	return "unknown"
}

// Features are the x86 extensions the CPU reports and usable by the OS
// (x/sys/cpu clears AVX ones whose registers the OS does not save, and
// honours GODEBUG=cpu.avx512f=off and the like), and whether pure Go was
// asked for.
type Features struct {
	AVX, AVX2, FMA, F16C                    bool
	AVX512F, AVX512BW, AVX512VL, AVX512VNNI bool
	AVX512VBMI, AVX512GFNI, AVX512BITALG    bool
	PureGo                                  bool // DS4_PUREGO asks for the pure-Go kernels
}

// CPULevel returns the highest level whose every extension f has,
// whatever PureGo says: what the CPU can run.
func (f Features) CPULevel() Level {
	switch {
	case !(f.AVX && f.AVX2 && f.FMA && f.F16C):
		return Generic
	case !(f.AVX512F && f.AVX512VL):
		return AVX2
	case !(f.AVX512BW && f.AVX512VNNI):
		return AVX512
	case !(f.AVX512VBMI && f.AVX512GFNI && f.AVX512BITALG):
		return AVX512VNNI
	}
	return AVX512VBMI
}

// Level returns the level the kernels run at: Generic when PureGo is set,
// else CPULevel.
func (f Features) Level() Level {
	if f.PureGo {
		return Generic
	}
	return f.CPULevel()
}

// PureGo reports whether v, a value of DS4_PUREGO, asks for pure Go:
// anything but "" and "0" does.
func PureGo(v string) bool { return v != "" && v != "0" }

// host is this process's CPU and environment, read once at start-up.
var host = func() Features {
	f := cpuFeatures()
	f.PureGo = PureGo(os.Getenv(PureGoEnv))
	return f
}()

// Host returns the features of this CPU and the DS4_PUREGO setting the
// process started with.
func Host() Features { return host }
