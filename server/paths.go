package server

import "github.com/arbor-coord/arbor/wire"

// checkPaths refuses a request that names a path that is not valid
// (wire.ValidatePath). Every path a request names (wire.Request.Paths) is
// checked here, when the request is read, whichever the protocol and the
// op: the ops that leave state behind without reading the tree
// (setWatches, addWatch) are held to the same rules as a getData.
func (c *conn) checkPaths(req *wire.Request) error {
	for p, sequential := range req.Paths() {
		if err := wire.ValidatePath(p, sequential); err != nil {
			return err
		}
	}
	return nil
}
