package app

import (
	"flag"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
)

// MemoryLimitEnv holds the container's memory limit in bytes (the Deployment fills it from a
// resourceFieldRef to limits.memory).
const MemoryLimitEnv = "MEMORY_LIMIT"

// DefaultMemoryLimitRatio is the share of the container's memory limit given to the Go runtime's soft
// limit: the rest is for what the runtime does not count (stacks of cgo, the binary, page cache of
// the root filesystem) and for the moment a collection takes to catch up.
const DefaultMemoryLimitRatio = 0.9

// MemoryLimit is the Go runtime's soft memory limit for a container limit of containerLimit bytes:
// ratio of it, rounded down. It is 0 (leave the runtime alone) when GOMEMLIMIT is set, which the runtime
// applies itself, or when containerLimit is empty.
func MemoryLimit(goMemLimit, containerLimit string, ratio float64) (int64, error) {
	if goMemLimit != "" || containerLimit == "" {
		return 0, nil
	}
	if !(ratio > 0 && ratio <= 1) {
		return 0, fmt.Errorf("--memory-limit-ratio: must be in (0, 1], got %v", ratio)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(containerLimit), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: not a number of bytes: %w", MemoryLimitEnv, err)
	}
	if n <= 0 {
		return 0, fmt.Errorf("%s: must be positive, got %d", MemoryLimitEnv, n)
	}
	limit := math.Floor(float64(n) * ratio)
	if limit >= float64(n) { // ratio 1, or a float64 rounded up past n
		return n, nil
	}
	return int64(limit), nil
}

// memoryOptions are the memory flags.
type memoryOptions struct {
	ratio float64
}

func (o *memoryOptions) bind(fs *flag.FlagSet) {
	fs.Float64Var(&o.ratio, "memory-limit-ratio", DefaultMemoryLimitRatio, "Share of the container's memory limit (env "+MemoryLimitEnv+", in bytes) set as the Go runtime's soft memory limit; GOMEMLIMIT, when set, wins.")
}

func (o *memoryOptions) validate() error {
	if !(o.ratio > 0 && o.ratio <= 1) {
		return fmt.Errorf("--memory-limit-ratio: must be in (0, 1], got %v", o.ratio)
	}
	return nil
}

// apply sets the runtime's soft memory limit from the environment.
func (o *memoryOptions) apply(log logr.Logger) error {
	limit, err := MemoryLimit(os.Getenv("GOMEMLIMIT"), os.Getenv(MemoryLimitEnv), o.ratio)
	if err != nil {
		return err
	}
	if limit == 0 {
		return nil
	}
	debug.SetMemoryLimit(limit)
	log.Info("set the Go runtime's memory limit", "bytes", limit, "containerLimit", os.Getenv(MemoryLimitEnv), "ratio", o.ratio)
	return nil
}
