" The chat transcript's highlighting (doc/decisions/0049): the markdown a reply is
" read by (headings, code blocks, quotes, inline code, bold, list markers, links),
" with patterns that start at a line's start or at a literal character. markdown.vim
" (which includes html.vim) took 10-20 ms to draw a screen of new rows and 15-35 ms
" to load; this takes a few tenths of a millisecond and ~2 ms.
if exists("b:current_syntax")
  finish
endif

syn match acpchatHeading /^#\{1,6}\s.*$/
syn region acpchatCodeBlock start=/^\s*\z(`\{3,}\|\~\{3,}\)/ end=/^\s*\z1\s*$/ keepend
syn match acpchatQuote /^\s*>.*$/ contains=acpchatCode,acpchatBold
syn match acpchatCode /`[^`]\+`/
syn match acpchatBold /\*\*[^* \t][^*]*\*\*/
syn match acpchatListMarker /^\s*\%([-*+]\|\d\+[.)]\)\ze\s/
syn match acpchatLink /\[[^\]]\+\](\S\+)/

hi def link acpchatHeading Title
hi def link acpchatCodeBlock String
hi def link acpchatQuote Comment
hi def link acpchatCode String
" Linked, not set: `:highlight clear` (every colorscheme) wipes a syntax file's
" own attributes but keeps its default links, and Neovim defines this one again.
hi def link acpchatBold @markup.strong
hi def link acpchatListMarker Special
hi def link acpchatLink Underlined

let b:current_syntax = "acpchat"
