// Package queue implements a bounded work queue with retries.
package queue

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrFull is returned when the queue cannot take another job.
var ErrFull = errors.New("queue: full")

// Job is one unit of work.
type Job struct {
	ID       string
	Attempts int
	Run      func(ctx context.Context) error
}

// Queue holds jobs until workers take them.
type Queue struct {
	mu       sync.Mutex
	jobs     []*Job
	capacity int
	retries  int
}

// New returns a queue that holds at most capacity jobs.
func New(capacity, retries int) *Queue {
	return &Queue{capacity: capacity, retries: retries}
}

// Push adds a job, or returns ErrFull.
func (q *Queue) Push(job *Job) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.jobs) >= q.capacity {
		return ErrFull
	}
	q.jobs = append(q.jobs, job)
	return nil
}

// Pop removes the oldest job, or returns nil when empty.
func (q *Queue) Pop() *Job {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.jobs) == 0 {
		return nil
	}
	job := q.jobs[0]
	q.jobs = q.jobs[1:]
	return job
}

// Work runs jobs until the context ends, retrying failures with a backoff.
func (q *Queue) Work(ctx context.Context) {
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		job := q.Pop()
		if job == nil {
			time.Sleep(backoff)
			continue
		}
		if err := job.Run(ctx); err != nil && job.Attempts < q.retries {
			job.Attempts++
			_ = q.Push(job)
		}
	}
}
