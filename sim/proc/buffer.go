package proc

import (
	"bytes"
	"sync"
)

// Buffer is a goroutine-safe bytes.Buffer for a program's stdout or stderr
// when a Main runs outside the kubelet (tests, harnesses): the program writes
// while the caller reads.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
