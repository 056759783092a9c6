// Package sbx is the Go API of sbx for programs that run sandboxes
// themselves, such as an eval runner: load a configuration, build an
// image, start a sandbox, run commands in it, stop it.
//
//	cfg, err := sbx.Load("specs", sbx.Options{})
//	sb, err := sbx.Start(ctx, cfg, "eval", sbx.StartOptions{})
//	defer sb.Stop(context.Background())
//	st, err := sb.Exec(ctx, sbx.Cmd{Args: []string{"claude", "-p", prompt}, Stdout: &out})
//
// It is a thin layer over the packages that do the work, and adds no
// behaviour of its own beyond the defaults a sandbox block gives (its
// user and environment): lang loads and validates the *.hcl files,
// builders/resolve pins their inputs into sbx.lock.hcl, builders/image
// builds an image into the content-addressed cache, and machine boots a
// sandbox's VM through providers/qemu and reaches its agent through
// guestconn. Programs that need more control use those packages
// directly. The command line (package command) is built on the same
// packages.
//
// Like the other library packages, sbx never prints and never exits;
// errors carry the diagnostics' file:line positions.
//
// The entry points are Load, Config.Build and Start.
package sbx
