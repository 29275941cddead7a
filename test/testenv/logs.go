package testenv

import (
	"os"
	"sync"

	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
)

// The managers of a test process log through one logger: JSON lines, every verbosity up to V(1),
// handed to the taps a test registers (TapLogs) and, with COS_TEST_LOG=1, written to stderr.
func init() {
	level := zap.NewAtomicLevelAt(zapcore.Level(-1))
	core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(logTaps), level)
	ctrl.SetLogger(zapr.NewLogger(zap.New(core)))
}

var logTaps = &tapWriter{stderr: os.Getenv("COS_TEST_LOG") == "1"}

// tapWriter hands every log line to the registered taps.
type tapWriter struct {
	mu     sync.Mutex
	stderr bool
	taps   map[int]func([]byte)
	next   int
}

func (w *tapWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stderr {
		_, _ = os.Stderr.Write(p)
	}
	for _, tap := range w.taps {
		tap(p)
	}
	return len(p), nil
}

// TapLogs calls tap with every log line of the managers of this process (one JSON object per call,
// never retained: copy what you keep) until untap is called. Taps run under a lock: keep them short.
func TapLogs(tap func(line []byte)) (untap func()) {
	logTaps.mu.Lock()
	defer logTaps.mu.Unlock()
	if logTaps.taps == nil {
		logTaps.taps = map[int]func([]byte){}
	}
	id := logTaps.next
	logTaps.next++
	logTaps.taps[id] = tap
	return func() {
		logTaps.mu.Lock()
		defer logTaps.mu.Unlock()
		delete(logTaps.taps, id)
	}
}
