package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// topicAnnotation marks a help topic: a command that only has a text
// ('s3lock help environment').
const topicAnnotation = "s3lock-help-topic"

// helpTopic returns the help topic name, listed in the top-level help with
// short, whose help is text alone.
func helpTopic(name, short, text string) *cobra.Command {
	return &cobra.Command{
		Use:         name,
		Short:       short,
		Long:        text,
		Annotations: map[string]string{topicAnnotation: "true"},
	}
}

// setRootHelp gives the top-level help a page a person reads: what s3lock
// is, its commands and help topics, and the few flags most runs set. Every
// command's own --help stays cobra's, with all its flags.
func setRootHelp(root *cobra.Command) {
	root.SetHelpCommand(&cobra.Command{
		Use:   "help [COMMAND | TOPIC]",
		Short: "Help about a command or a topic",
		RunE: func(_ *cobra.Command, args []string) error {
			// cobra's own printed the whole help and exited 0 for a topic
			// it did not know.
			target, rest, err := root.Find(args)
			if err != nil || len(rest) > 0 {
				return usagef("no command or help topic %q: 's3lock --help' lists them", strings.Join(args, " "))
			}
			return target.Help()
		},
	})
	commandHelp := root.HelpFunc()
	root.SetHelpFunc(func(cmd *cobra.Command, args []string) {
		switch {
		case cmd == root:
			writeRootHelp(cmd.OutOrStdout(), root)
		case cmd.Annotations[topicAnnotation] != "":
			fmt.Fprintln(cmd.OutOrStdout(), strings.TrimRight(cmd.Long, "\n"))
		default:
			commandHelp(cmd, args)
		}
	})
}

func writeRootHelp(w io.Writer, root *cobra.Command) {
	var commands, topics strings.Builder
	for _, c := range root.Commands() {
		line := fmt.Sprintf("  %-14s %s\n", c.Name(), c.Short)
		switch {
		case c.Annotations[topicAnnotation] != "":
			topics.WriteString(line)
		case c.IsAvailableCommand():
			commands.WriteString(line)
		}
	}
	flags := pflag.NewFlagSet(root.Name(), pflag.ContinueOnError)
	for _, name := range rootFlags {
		if f := root.Flags().Lookup(name); f != nil {
			flags.AddFlag(f)
		}
	}
	fmt.Fprintf(w, "%s\n\nUsage:\n  %s COMMAND [flags] [args]\n\nCommands:\n%s\n", root.Long, root.Name(), commands.String())
	fmt.Fprintf(w, "Flags (every command takes these; its --help lists all of them):\n%s\n", flags.FlagUsages())
	fmt.Fprintf(w, "Help topics ('s3lock help TOPIC'):\n%s", topics.String())
}
