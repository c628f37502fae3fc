package mbuf

// Oracles for the external test package.
var (
	CL2L3L4       = cL2L3L4
	CHeadroom     = cHeadroom
	CTailroom     = cTailroom
	CRefcntUpdate = cRefcntUpdate
)
