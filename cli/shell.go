package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/peterh/liner"
	"github.com/spf13/cobra"
)

// shell is the state the shell keeps between its lines: one session for
// all of them and a working directory for relative paths.
type shell struct {
	c       *client.Client
	cwd     string
	timeout time.Duration // --timeout given to arbor shell
	parent  *env          // the env arbor shell runs in
}

func (e *env) shellCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "shell",
		Short: "Run arbor commands interactively, on one session",
		Long: "Run arbor commands one line at a time on one session, which keeps its ephemeral\n" +
			"nodes until the shell exits. Every command is there, without the \"arbor\"; paths\n" +
			"may be relative to the working directory (cd, pwd, \".\" and \"..\"). Quote data\n" +
			"with spaces in \"double\" or 'single' quotes. Tab completes command names and\n" +
			"znode paths; the history is kept in ~/.arbor_history. Ctrl-C ends a running\n" +
			"command (a watch, say); Ctrl-D or exit leaves.\n\n" +
			"When stdin is not a terminal, the shell reads commands from it, one per line,\n" +
			"without prompts, and exits with the status of the last command. Empty lines and\n" +
			"lines starting with # are skipped.",
		Example: "  arbor shell\n" +
			"  echo 'ls /' | arbor shell\n" +
			"  printf 'create -e /me \"a b\"\\nephemerals\\n' | arbor shell",
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := e.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			sh := &shell{c: c, cwd: "/", timeout: e.timeout, parent: e}
			if f, ok := e.stdin.(*os.File); ok && f == os.Stdin && isTerminal() {
				return sh.interactive(cmd.Context())
			}
			return sh.script(cmd.Context(), e.stdin)
		},
	}
}

// isTerminal reports whether stdin and stdout are a terminal.
func isTerminal() bool {
	if _, err := liner.TerminalMode(); err != nil {
		return false
	}
	fi, err := os.Stdout.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// exitStatus carries the shell's exit status out of cobra.
type exitStatus int

func (s exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(s)) }

// script runs the lines of r and ends with the status of the last command.
// An interrupt ends it: the command running, and the script.
func (sh *shell) script(ctx context.Context, r io.Reader) error {
	lines := make(chan string)
	var readErr error // set before lines is closed
	go func() {       // left blocked reading r if ctx ends first
		defer close(lines)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
		readErr = sc.Err()
	}()
	status := 0
	for {
		var text string
		var ok bool
		select {
		case text, ok = <-lines:
		case <-ctx.Done():
			return nil
		}
		if !ok {
			if readErr != nil {
				return readErr
			}
			break
		}
		code, quit := sh.runLine(ctx, text)
		if quit {
			break
		}
		if code >= 0 {
			status = code
		}
		if sh.ended() {
			return sh.c.Err()
		}
	}
	if status != 0 {
		return exitStatus(status)
	}
	return nil
}

// interactive reads lines with editing, history and completion.
func (sh *shell) interactive(ctx context.Context) error {
	ln := liner.NewLiner()
	defer ln.Close()
	ln.SetCtrlCAborts(true)
	ln.SetTabCompletionStyle(liner.TabPrints)
	ln.SetWordCompleter(sh.complete)
	history := historyFile()
	if f, err := os.Open(history); err == nil {
		_, _ = ln.ReadHistory(f)
		f.Close()
	}
	defer func() {
		if history == "" {
			return
		}
		if f, err := os.OpenFile(history, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600); err == nil {
			_, _ = ln.WriteHistory(f)
			f.Close()
		}
	}()
	out := sh.parent.stdout
	fmt.Fprintf(out, "Connected to %s, session %s. Type help for the commands, exit to leave.\n",
		strings.Join(sh.parent.serverList(), ","), sessionHex(sh.c.SessionID()))
	type prompted struct {
		line string
		err  error
	}
	for {
		// The prompt waits in a goroutine so that SIGTERM can end the
		// shell at the prompt; the deferred Close restores the terminal.
		res := make(chan prompted, 1)
		prompt := "arbor " + sh.cwd + "> "
		go func() {
			line, err := ln.Prompt(prompt)
			res <- prompted{line, err}
		}()
		var line string
		var err error
		select {
		case p := <-res:
			line, err = p.line, p.err
		case <-ctx.Done():
			fmt.Fprintln(out)
			return nil
		}
		switch {
		case errors.Is(err, liner.ErrPromptAborted):
			continue // Ctrl-C drops the line
		case errors.Is(err, io.EOF):
			fmt.Fprintln(out)
			return nil
		case err != nil:
			return err
		}
		if strings.TrimSpace(line) != "" {
			ln.AppendHistory(line)
		}
		lctx, done := sh.parent.interrupts.scope(ctx)
		_, quit := sh.runLine(lctx, line)
		done()
		if quit {
			return nil
		}
		if sh.ended() {
			return sh.c.Err()
		}
	}
}

// historyFile is ~/.arbor_history, or "" without a home directory.
func historyFile() string {
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".arbor_history")
}

// ended reports whether the shell's session is over.
func (sh *shell) ended() bool {
	select {
	case <-sh.c.Done():
		return true
	default:
		return false
	}
}

// runLine runs one line of the shell and returns its exit status (-1 for
// a line with no command) and whether the shell should stop.
func (sh *shell) runLine(ctx context.Context, line string) (code int, quit bool) {
	if t := strings.TrimSpace(line); t == "" || strings.HasPrefix(t, "#") {
		return -1, false
	}
	p := sh.parent
	args, err := splitLine(line)
	if err != nil {
		fmt.Fprintln(p.stderr, "arbor:", err)
		return 2, false
	}
	if args[0] == "exit" || args[0] == "quit" {
		return 0, true
	}
	le := &env{stdin: p.stdin, stdout: p.stdout, stderr: p.stderr, interrupts: p.interrupts, sh: sh}
	return le.execute(ctx, args), false
}

// splitLine splits a shell line into words at spaces and tabs. "Double
// quotes" keep spaces and take \" and \\ as escapes; 'single quotes' keep
// everything up to the next '.
func splitLine(line string) ([]string, error) {
	var words []string
	var word strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		ch := line[i]
		switch {
		case ch == ' ' || ch == '\t':
			if inWord {
				words = append(words, word.String())
				word.Reset()
				inWord = false
			}
		case ch == '\'':
			end := strings.IndexByte(line[i+1:], '\'')
			if end < 0 {
				return nil, usagef("unterminated ' quote")
			}
			word.WriteString(line[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case ch == '"':
			i++
			for ; i < len(line) && line[i] != '"'; i++ {
				if line[i] == '\\' && i+1 < len(line) && (line[i+1] == '"' || line[i+1] == '\\') {
					i++
				}
				word.WriteByte(line[i])
			}
			if i == len(line) {
				return nil, usagef("unterminated \" quote")
			}
			inWord = true
		default:
			word.WriteByte(ch)
			inWord = true
		}
	}
	if inWord {
		words = append(words, word.String())
	}
	return words, nil
}

func (sh *shell) cdCommand(e *env) *cobra.Command {
	return &cobra.Command{
		Use:               "cd [PATH]",
		Short:             "Change the working directory (shell only)",
		Long:              "Make PATH (default /) the directory that relative paths start from.",
		Example:           "  cd /app\n  cd ..\n  cd jobs",
		Args:              usageArgs(cobra.RangeArgs(0, 1)),
		ValidArgsFunction: e.completePathArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			path := "/"
			if len(args) == 1 {
				path = e.path(args[0])
			}
			return e.run(cmd, func(ctx context.Context, c *client.Client) error {
				ok, _, err := c.Exists(ctx, path)
				if err == nil && !ok {
					err = client.ErrNoNode
				}
				if err != nil {
					return describe(err, path)
				}
				sh.cwd = path
				return nil
			})
		},
	}
}

func (sh *shell) pwdCommand(e *env) *cobra.Command {
	return &cobra.Command{
		Use:     "pwd",
		Short:   "Print the working directory (shell only)",
		Example: "  pwd",
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			if e.json() {
				return e.printJSON(pathJSON{Path: sh.cwd})
			}
			_, err := fmt.Fprintln(e.stdout, sh.cwd)
			return err
		},
	}
}
