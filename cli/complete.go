package cli

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/recipes"
	"github.com/spf13/cobra"
)

// completeTimeout bounds the requests of a tab completion: a slow server
// must not freeze the user's line.
const completeTimeout = 2 * time.Second

// completePath returns the paths that complete word: the children of the
// node that word's part up to its last "/" names (relative to cwd when it
// is not absolute) whose names start with the rest, spelled as word is, so
// that a relative word stays relative. It returns nil when that node
// cannot be listed.
func completePath(ctx context.Context, c *client.Client, cwd, word string) []string {
	dir, base := "", word
	if i := strings.LastIndexByte(word, '/'); i >= 0 {
		dir, base = word[:i+1], word[i+1:]
	}
	names, _, err := c.Children(ctx, resolvePath(cwd, dir))
	if err != nil {
		return nil
	}
	var out []string
	for _, name := range names {
		if strings.HasPrefix(name, base) {
			out = append(out, dir+name)
		}
	}
	return out
}

// complete is the shell's tab completion (a liner.WordCompleter; pos counts
// runes): command names in the first word, znode paths in the others.
func (sh *shell) complete(line string, pos int) (head string, completions []string, tail string) {
	runes := []rune(line)
	pos = min(max(pos, 0), len(runes))
	before, tail := string(runes[:pos]), string(runes[pos:])
	start := strings.LastIndexAny(before, " \t") + 1
	head, word := before[:start], before[start:]
	switch {
	case strings.TrimSpace(head) == "":
		completions = sh.completeCommand(word)
	case strings.HasPrefix(word, "-"):
	default:
		ctx, cancel := context.WithTimeout(context.Background(), completeTimeout)
		defer cancel()
		completions = completePath(ctx, sh.c, sh.cwd, word)
	}
	return head, completions, tail
}

// completeCommand returns the shell's command names that start with word.
func (sh *shell) completeCommand(word string) []string {
	names := []string{"exit", "quit"}
	for _, cmd := range (&env{sh: sh}).rootCommand().Commands() {
		if !cmd.Hidden {
			names = append(names, cmd.Name())
		}
	}
	names = append(names, "help")
	slices.Sort(names)
	names = slices.Compact(names)
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, word) {
			out = append(out, n)
		}
	}
	return out
}

// completePathArg completes a command's PATH argument for the completion
// scripts of bash and zsh (and in the shell), asking the servers.
func (e *env) completePathArg(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	const directive = cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return e.completeWith(directive, func(ctx context.Context, c *client.Client, cwd string) []string {
		return completePath(ctx, c, cwd, toComplete)
	})
}

// completeServiceArg completes a SERVICE argument with the names of the
// registered services.
func (e *env) completeServiceArg(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return e.completeWith(cobra.ShellCompDirectiveNoFileComp, func(ctx context.Context, c *client.Client, _ string) []string {
		return completePath(ctx, c, recipes.ServicesRoot, toComplete)
	})
}

// completeWith runs complete on the shell's session and working
// directory, or on a session of its own from /, within completeTimeout.
func (e *env) completeWith(directive cobra.ShellCompDirective,
	complete func(ctx context.Context, c *client.Client, cwd string) []string) ([]string, cobra.ShellCompDirective) {
	ctx, cancel := context.WithTimeout(context.Background(), completeTimeout)
	defer cancel()
	if e.sh != nil {
		return complete(ctx, e.sh.c, e.sh.cwd), directive
	}
	opts, err := e.clientOptions()
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	c, err := client.Dial(ctx, e.serverList(), opts...)
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	defer c.Close()
	return complete(ctx, c, "/"), directive
}
