package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/arbor-coord/arbor/client"
	"github.com/spf13/cobra"
)

// previewBytes is how much of a node's data tree shows.
const previewBytes = 32

// treeNode is one node of the tree command, and its JSON.
type treeNode struct {
	Path string `json:"path"`
	Name string `json:"name"` // "" for the root
	dataJSON
	Ephemeral  bool        `json:"ephemeral"`
	Sequential bool        `json:"sequential"`
	Stat       *statJSON   `json:"stat"`
	Truncated  bool        `json:"truncated"` // below the depth limit: children not listed
	Children   []*treeNode `json:"children"`

	data []byte
}

func (e *env) treeCommand() *cobra.Command {
	var depth int
	cmd := &cobra.Command{
		Use:   "tree [-d DEPTH] [PATH]",
		Short: "Draw a subtree, with a preview of each node's data",
		Long: "Draw PATH (default /, or the working directory in the shell) and the nodes below\n" +
			"it, one per line, with the first " + strconv.Itoa(previewBytes) + " bytes of each node's data, quoted (… when\n" +
			"there is more). [e] marks an ephemeral node, [s] a sequential one (a name ending\n" +
			"in ten digits). With -d, stop DEPTH levels below PATH; [+N] then says that N\n" +
			"children are not shown. The JSON is nested objects with each node's full data.",
		Example:           "  arbor tree\n  arbor tree -d 2 /app\n  arbor tree -o json /app",
		Args:              usageArgs(cobra.RangeArgs(0, 1)),
		ValidArgsFunction: e.completePathArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			if depth < 0 {
				return usagef("depth %d is below 0", depth)
			}
			path := "/"
			if e.sh != nil {
				path = e.sh.cwd
			}
			if len(args) == 1 {
				path = e.path(args[0])
			}
			return e.runLong(cmd, func(ctx context.Context, c *client.Client) error {
				root, err := e.fetchTree(ctx, c, path, depth, 0)
				if err != nil {
					return err
				}
				if root == nil {
					return describe(client.ErrNoNode, path)
				}
				if e.json() {
					return e.printJSON(root)
				}
				fmt.Fprintln(e.stdout, root.Path+root.marks())
				drawChildren(e.stdout, root, "")
				return nil
			})
		},
	}
	cmd.Flags().IntVarP(&depth, "depth", "d", 0, "levels below PATH to show (0: all)")
	return cmd
}

// fetchTree reads path and its subtree down to maxDepth levels below the
// top (0: all). It returns nil for a node that is missing.
func (e *env) fetchTree(ctx context.Context, c *client.Client, path string, maxDepth, depth int) (*treeNode, error) {
	rctx, cancel := e.req(ctx)
	data, st, err := c.Get(rctx, path)
	cancel()
	if errors.Is(err, client.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, describe(err, path)
	}
	name := path[strings.LastIndexByte(path, '/')+1:]
	n := &treeNode{
		Path: path, Name: name, dataJSON: dataOf(data), data: data,
		Ephemeral: st.EphemeralOwner != 0, Sequential: isSequential(name),
		Stat: statOf(st), Children: []*treeNode{},
	}
	if st.NumChildren == 0 {
		return n, nil
	}
	if maxDepth > 0 && depth >= maxDepth {
		n.Truncated = true
		return n, nil
	}
	rctx, cancel = e.req(ctx)
	names, _, err := c.Children(rctx, path)
	cancel()
	if errors.Is(err, client.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, describe(err, path)
	}
	for _, name := range names {
		child, err := e.fetchTree(ctx, c, joinPath(path, name), maxDepth, depth+1)
		if err != nil {
			return nil, err
		}
		if child != nil {
			n.Children = append(n.Children, child)
		}
	}
	return n, nil
}

// drawChildren draws n's children below it; prefix is what goes before
// each line at this level.
func drawChildren(w io.Writer, n *treeNode, prefix string) {
	for i, child := range n.Children {
		branch, indent := "├── ", "│   "
		if i == len(n.Children)-1 {
			branch, indent = "└── ", "    "
		}
		fmt.Fprintln(w, prefix+branch+child.Name+child.marks())
		drawChildren(w, child, prefix+indent)
	}
}

// marks is what follows a node's name: [e], [s], [+N] and the data
// preview, each after a space.
func (n *treeNode) marks() string {
	var b strings.Builder
	if n.Ephemeral {
		b.WriteString(" [e]")
	}
	if n.Sequential {
		b.WriteString(" [s]")
	}
	if n.Truncated {
		fmt.Fprintf(&b, " [+%d]", n.Stat.NumChildren)
	}
	if p := preview(n.data); p != "" {
		b.WriteString(" " + p)
	}
	return b.String()
}

// preview quotes the start of data, with … when there is more; "" for no
// data. Text is cut at a character boundary.
func preview(data []byte) string {
	if len(data) == 0 {
		return ""
	}
	cut := data
	if len(cut) > previewBytes {
		cut = cut[:previewBytes]
		if utf8.Valid(data) {
			for len(cut) > 0 && !utf8.Valid(cut) {
				cut = cut[:len(cut)-1]
			}
		}
	}
	s := strconv.Quote(string(cut))
	if len(cut) < len(data) {
		s += "…"
	}
	return s
}

// isSequential reports whether name ends in the ten digits of a sequential
// create.
func isSequential(name string) bool {
	if len(name) < 10 {
		return false
	}
	for _, r := range name[len(name)-10:] {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
