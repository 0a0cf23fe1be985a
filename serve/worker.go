package serve

import "sync"

// Pages are built, encoded and compressed on long-lived goroutines rather
// than on the request's: net/http serves each connection on a new
// goroutine, whose small stack a first read grows by copying two or three
// times (building a view, sorting its families, compressing), 4 % of the
// sidecar's CPU with every view read after every scrape by a new
// connection (a CPU profile of the running binary, 100 ms, curl as
// scripts/sidebyside.sh -v reads). A worker's stack stays grown between
// scrapes. Two workers, so that a small view's first read does not wait
// behind a whole large page's.
const workers = 2

type job struct {
	f     func()
	done  chan struct{}
	panic any
}

var (
	startWorkers sync.Once
	jobs         chan *job
)

// onWorker runs f on a worker and returns when it has run; a panic in f
// is raised again on the caller's goroutine, where net/http recovers it
// for its connection. f must not call onWorker.
func onWorker(f func()) {
	startWorkers.Do(func() {
		jobs = make(chan *job)
		for range workers {
			go work()
		}
	})
	j := &job{f: f, done: make(chan struct{})}
	jobs <- j
	<-j.done
	if j.panic != nil {
		panic(j.panic)
	}
}

func work() {
	for j := range jobs {
		run(j)
	}
}

func run(j *job) {
	defer close(j.done)
	defer func() { j.panic = recover() }()
	j.f()
}
