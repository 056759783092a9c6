package machine

import "time"

// SetResumeHelloWait sets resumeHelloWait until the returned function
// is called.
func SetResumeHelloWait(d time.Duration) func() {
	old := resumeHelloWait
	resumeHelloWait = d
	return func() { resumeHelloWait = old }
}
