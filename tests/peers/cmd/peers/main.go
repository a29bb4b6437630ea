// Command peers runs upstream code on files gpuprov writes and prints what that code says, as
// JSON on stdout: the parsed and defaulted result, or the peer's own error text. Each
// subcommand lives in its own file and registers itself in init().
//
//	peers SUBCOMMAND [ARGS...]
//	peers versions              the pinned module versions this binary was built with
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
)

// subcommand runs with its own arguments and returns the value printed as JSON, or an error
// printed as {"error": "..."} with exit status 1. Usage errors exit 2.
type subcommand struct {
	usage string
	run   func(args []string) (any, error)
}

var subcommands = map[string]subcommand{}

func register(name, usage string, run func(args []string) (any, error)) {
	if _, taken := subcommands[name]; taken {
		panic("subcommand registered twice: " + name)
	}
	subcommands[name] = subcommand{usage: usage, run: run}
}

// usageError marks a mistake in the command line (exit 2), not a peer's verdict (exit 1).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

func printUsage() {
	names := make([]string, 0, len(subcommands))
	for name := range subcommands {
		names = append(names, name)
	}
	sort.Strings(names)
	fmt.Fprintln(os.Stderr, "usage: peers SUBCOMMAND [ARGS...]")
	for _, name := range names {
		fmt.Fprintf(os.Stderr, "  %-22s %s\n", name, subcommands[name].usage)
	}
}

func main() {
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" {
		printUsage()
		os.Exit(2)
	}
	cmd, ok := subcommands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "peers: unknown subcommand %q\n", os.Args[1])
		printUsage()
		os.Exit(2)
	}
	result, err := cmd.run(os.Args[2:])
	out := json.NewEncoder(os.Stdout)
	out.SetIndent("", "  ")
	if err != nil {
		if _, isUsage := err.(usageError); isUsage {
			fmt.Fprintf(os.Stderr, "peers %s: %v\nusage: peers %s %s\n", os.Args[1], err, os.Args[1], cmd.usage)
			os.Exit(2)
		}
		_ = out.Encode(map[string]string{"error": err.Error()})
		os.Exit(1)
	}
	if err := out.Encode(result); err != nil {
		fmt.Fprintf(os.Stderr, "peers %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}
