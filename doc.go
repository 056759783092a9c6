// Package sbx is the Go API of sbx for programs that run sandboxes
// themselves, such as an eval runner: load a configuration, build an
// image, start a sandbox, run commands in it, stop it.
//
//	cfg, err := sbx.Load("specs", sbx.Options{})
//	sb, err := sbx.Start(ctx, cfg, "eval", sbx.StartOptions{})
//	defer sb.Stop(context.Background())
//	st, err := sb.Exec(ctx, sbx.Cmd{Args: []string{"claude", "-p", prompt}, Stdout: &out})
//
// It is a thin layer over internal/pipeline, the one lock → build →
// start path the command line takes too, and adds no behaviour of its
// own beyond the defaults a sandbox block gives (its user and
// environment): package lang loads and validates the *.hcl files,
// Config.Lock pins their inputs into sbx.lock.hcl, Config.Build builds
// an image into the content-addressed cache with the same options sbx
// build reads from the environment, so both make the same bytes from
// the same spec and lock, and Start starts a sandbox (internal/sandbox: its VM, network and file
// servers) and reaches its guest agent.
//
// Every type this package exports is its own (Cmd, ExitStatus, Process,
// Image, Lock, EvalRun, …) or one of the public vocabulary packages
// lang, policy, addrs and platform: none names a type of the module's
// internal packages, which a program outside the module could not
// name or construct (internal/archtest checks it).
//
// Like the other library packages, sbx never prints and never exits;
// errors carry the diagnostics' file:line positions.
//
// The entry points are Load, Config.Build and Start.
package sbx
