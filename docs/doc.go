// Package docs holds no code: it is the folder of facts the suite and the sim
// rely on (README.md, operator.md, routers.md, engines.md, llmd.md). Its test
// keeps them honest: every fact section cites its upstream source as
// owner/repo@commit:path, every pointer at docs/<file>.md#<section> resolves,
// and nothing in the project points at files outside it.
package docs
